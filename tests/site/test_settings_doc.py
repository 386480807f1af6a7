"""docs/settings.md is what the settings code generates (``manage.py settings_doc``)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from tests.conftest import ROOT
from veena_site.settings_doc import (
    EXPRESSION,
    PAGE,
    SERVE,
    collect,
    missing_help,
    page,
)


def test_settings_page_is_current() -> None:
    written = (ROOT / PAGE).read_text(encoding="utf-8")
    assert written == page(ROOT), (
        f"{PAGE} is stale: run `.venv/bin/python manage.py settings_doc --write`"
    )


def test_every_setting_has_a_meaning_and_every_meaning_a_setting() -> None:
    assert missing_help(collect(ROOT)) == []


# Read, then turned into something else by the module.
DERIVED = {"SECRET_KEY": "generated when unset", "SECURE_PROXY_SSL_HEADER": "a tuple"}


def test_literal_defaults_are_the_values_the_settings_modules_hold() -> None:
    """The ``ast`` reading agrees with Python's: each literal default is the value the
    module computed (variables set for this run are skipped)."""
    checked = 0
    for setting in collect(ROOT):
        if setting.module == SERVE or setting.literal is EXPRESSION:
            continue
        if setting.name in os.environ or setting.name in DERIVED:
            continue
        module = importlib.import_module(setting.module[:-3].replace("/", "."))
        if not hasattr(module, setting.name):
            continue  # read into another structure (DATABASE_CONN_MAX_AGE)
        assert getattr(module, setting.name) == setting.literal, setting.name
        checked += 1
    assert checked > 100


def test_a_new_setting_shows_up_undocumented(tmp_path: Path) -> None:
    conf = tmp_path / "veena_site" / "conf"
    conf.mkdir(parents=True)
    (tmp_path / "veena_site" / "settings.py").write_text(
        'X = env.int("NEW_LIMIT", default=3)\nY = env("OTHER", default=None)\n'
    )
    (conf / "extra.py").write_text('Z = env.list("NEW_LIST", default=["a", "b"])\n')
    serve = tmp_path / SERVE
    serve.parent.mkdir(parents=True)
    serve.write_text('p = os.environ.get("NEW_PORT", "1")\n')
    found = {s.name: s for s in collect(tmp_path)}
    assert [(s.kind, s.default) for s in found.values()] == [
        ("int", "`3`"),
        ("str", "unset"),
        ("list", "`a,b`"),
        ("str", "`1`"),
    ]
    assert missing_help(list(found.values()))[:4] == sorted(found)
    with pytest.raises(AssertionError):
        assert "(undocumented)" not in page(tmp_path)
