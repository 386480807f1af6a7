"""The settings registry: one declaration a setting, its page, the environment it reads.

docs/settings.md is what the registry generates (``manage.py settings_doc``); an operator's
settings stay few (issue 33); constants never come from the environment, and reach a child
process only through ``SETTINGS_OVERRIDES``.
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import environ
import pytest

from tests.conftest import ROOT, child_env
from veena_site.conf.registry import (
    AREAS,
    MAX_OPERATOR_SETTINGS,
    OVERRIDES,
    SETTINGS,
    Group,
    Registry,
    child_environment,
    declared_kinds,
    overrides,
)
from veena_site.settings_doc import PAGE, page, render

PACKAGES = (
    "gateway",
    "veena_site",
    "accounts",
    "tts",
    "asr",
    "openai_rest",
    "veena_cli",
)
# Variables that application code reads itself: not settings of the gateway.
NOT_SETTINGS = {
    "VLLM_RPC_BASE_PATH": "gateway.worker.vllm_runner sets it for vLLM, then reads it back",
    "VEENA_URL": "the veena CLI's own (docs/clients.md)",
    "VEENA_API_KEY": "the veena CLI's own (docs/clients.md)",
}


def test_settings_page_is_current() -> None:
    written = (ROOT / PAGE).read_text(encoding="utf-8")
    assert written == page(), (
        f"{PAGE} is stale: run `.venv/bin/python manage.py settings_doc --write`"
    )


def test_an_operator_reads_about_at_most_80_environment_variables() -> None:
    operators = SETTINGS.of_kind("env")
    assert len(operators) <= MAX_OPERATOR_SETTINGS
    assert f"**{len(operators)} environment variables**" in page()


def test_the_page_is_the_same_whatever_the_environment_and_machine(
    tmp_path: Path,
) -> None:
    """A default computed from the machine or another setting is written as its rule."""
    code = (
        "import os, sys; os.cpu_count = lambda: 977; "
        "from veena_site.settings_doc import page; sys.stdout.write(page())"
    )
    env = child_env(
        DJANGO_SETTINGS_MODULE="veena_site.settings",
        DATA_DIR=str(tmp_path),
        PRODUCTION="true",
        SECRET_KEY="s" * 50,
        REDIS_URL="redis://127.0.0.1:1/0",
        TTS_ENGINE="vllm",
        TTS_WORKER_SLOTS="3",
        ASR_MODEL="other",
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == page()


def test_each_setting_is_bound_to_its_name_with_its_default() -> None:
    """Django reads the module-level name: it must be the declared one (issue 33's one name,
    one default); variables set for this run are skipped."""
    module = importlib.import_module("veena_site.settings")
    areas = {f"veena_site.conf.{area}" for area in AREAS}
    assert {group.module for group in SETTINGS.groups} == areas
    kinds = {name: setting.kind for name, setting in SETTINGS.settings.items()}
    assert declared_kinds() == kinds  # what a parent without settings routes by
    derived = {"SECRET_KEY", "SECURE_PROXY_SSL_HEADER"}  # generated, made a tuple
    for setting in SETTINGS.settings.values():
        assert hasattr(module, setting.name), setting.name
        if setting.name in os.environ or setting.name in derived:
            continue
        assert getattr(module, setting.name) == setting.default, setting.name


def _scratch() -> tuple[Registry, Group]:
    registry = Registry()
    return registry, Group("veena_site.conf.scratch", "Scratch", "", registry=registry)


def test_a_declared_setting_reads_its_variable_and_a_constant_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry, group = _scratch()
    monkeypatch.setenv("SCRATCH_LIMIT", "7")
    monkeypatch.setenv("SCRATCH_KNOB", "9.5")
    assert group.env("SCRATCH_LIMIT", int, 3, "a limit") == 7
    assert group.constant("SCRATCH_KNOB", 0.5, "a knob") == 0.5
    with pytest.raises(environ.ImproperlyConfigured, match="declared twice"):
        group.constant("SCRATCH_KNOB", 1.0, "again")
    text = render(registry)
    assert "**1 environment variables**" in text
    assert "| `SCRATCH_LIMIT` | int | `3` | a limit |" in text
    assert "| `SCRATCH_KNOB` | Scratch | `0.5` | a knob |" in text


def test_a_new_setting_makes_the_page_stale() -> None:
    group = Group("veena_site.conf.scratch", "Scratch", "", registry=SETTINGS)
    try:
        group.constant("SCRATCH_NEW", 1, "new")
        assert page() != (ROOT / PAGE).read_text(encoding="utf-8")
    finally:
        SETTINGS.groups.remove(group)
        del SETTINGS.settings["SCRATCH_NEW"]


def test_overrides_set_constants_only_and_check_their_types() -> None:
    assert overrides('{"ASR_CHUNK_S": 1, "ASR_PAUSE_CONFIRM": true}') == {
        "ASR_CHUNK_S": 1.0,
        "ASR_PAUSE_CONFIRM": True,
    }
    assert overrides("") == {}
    for text, error in [
        ('{"TTS_ENGINE": "fake"}', "set it by its name"),
        ('{"NO_SUCH": 1}', "no setting NO_SUCH"),
        ('{"ASR_AGREE_FOLLOWED": 1.5}', "takes a int"),
        ('{"ASR_FINAL_REUSE": 1}', "takes a bool"),
        ("[1]", "JSON object"),
    ]:
        with pytest.raises(environ.ImproperlyConfigured, match=error):
            overrides(text)


def test_child_environment_sends_constants_through_the_overrides() -> None:
    env = child_environment(
        {"DJANGO_SETTINGS_MODULE": "tests.settings"},
        TTS_ENGINE="fake",
        TTS_WORKER_SLOTS=2,
        ASR_TRIM_NONSPEECH="false",
        LEASE_TTL_SECONDS=6,
    )
    again = child_environment(env, USAGE_STALE_SECONDS=3)
    assert again["TTS_ENGINE"] == "fake" and again["TTS_WORKER_SLOTS"] == "2"
    assert "LEASE_TTL_SECONDS" not in again
    assert json.loads(again[OVERRIDES]) == {
        "ASR_TRIM_NONSPEECH": False,
        "LEASE_TTL_SECONDS": 6.0,
        "USAGE_STALE_SECONDS": 3,
    }
    with pytest.raises(environ.ImproperlyConfigured, match="ignores"):
        child_environment(
            {"DJANGO_SETTINGS_MODULE": "veena_site.settings"}, LEASE_TTL_SECONDS=6
        )


@functools.cache
def _app_calls() -> list[tuple[str, ast.Call]]:
    """Each call in the application packages, with its ``path:line``."""
    return [
        (f"{path.relative_to(ROOT)}:{node.lineno}", node)
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
    ]


def _restates_a_default(call: ast.Call) -> bool:
    func, args = call.func, call.args
    return (
        isinstance(func, ast.Name)
        and func.id == "getattr"
        and len(args) == 3
        and isinstance(args[0], ast.Name)
        and "settings" in args[0].id
    )


def test_no_code_restates_a_default_with_getattr() -> None:
    """``getattr(settings, "X", default)`` is a second default (issue 33: one had drifted)."""
    assert [where for where, call in _app_calls() if _restates_a_default(call)] == []


def _variable_read(call: ast.Call) -> str | None:
    """The name ``os.environ.get(NAME)`` or ``os.getenv(NAME)`` reads."""
    func = call.func
    if not isinstance(func, ast.Attribute) or not call.args:
        return None
    owner, first = func.value, call.args[0]
    environ_get = (
        func.attr == "get"
        and isinstance(owner, ast.Attribute)
        and owner.attr == "environ"
    )
    if (environ_get or func.attr == "getenv") and isinstance(first, ast.Constant):
        return str(first.value)
    return None


def test_only_the_registry_reads_the_environment() -> None:
    """A variable read anywhere else would be a setting the page does not list."""
    calls = _app_calls()
    read = {name for _, call in calls if (name := _variable_read(call))}
    assert read == set(NOT_SETTINGS)
    readers = {
        where.split(":")[0]
        for where, call in calls
        if isinstance(call.func, ast.Attribute) and call.func.attr == "Env"
    }
    assert readers == {"veena_site/conf/registry.py"}
