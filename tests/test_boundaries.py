"""The process boundary in the tree (issue 33, STYLE 2, 33), walked statically over the source.

Worker-side code lives in folders named ``worker`` (``gateway/worker/``, ``tts/worker/``,
``asr/worker/``) and runs only in a worker process; the gateway side (consumers, views, the
job link, accounts, the OpenAI REST app, the server's concerns) runs only in a gateway. Both
import the shared modules: the kernel's top level and its transport (``gateway/*.py``,
``gateway/layers/``), and each app's contracts and pure tables (``SHARED`` below). Only the
wiring (``veena_site``, and the one-off ``prepare_whisper_hf`` command) imports both sides.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, child_env
from tests.support.sources import imports, reachable_modules

PROJECT = ("veena_site", "gateway", "tts", "asr", "accounts", "openai_rest")
APPS = ("gateway", "tts", "asr")
# What each app shares between the processes: contracts, audio formats, engine descriptions.
SHARED_OF_APPS = (
    "tts.messages",
    "tts.audio",
    "tts.engine_info",
    "tts.orpheus",
    "tts.normalize",
    "asr.messages",
    "asr.audio",
    "asr.whisper",
)
GATEWAY_ROOTS = (
    "tts.consumers",
    "asr.consumers",
    "tts.views",
    "openai_rest.urls",
    "veena_site.urls",
    "tts.routing",
    "asr.routing",
)
WIRING = ("veena_site", "asr.management")


def module_name(path: Path) -> str:
    name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return name.removesuffix(".__init__")


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def worker_side(name: str) -> bool:
    """A module in one of the worker folders."""
    parts = name.split(".")
    return parts[0] in APPS and len(parts) > 1 and parts[1] == "worker"


def shared(name: str) -> bool:
    """A module both processes import."""
    parts = name.split(".")
    if parts[0] == "gateway":
        return len(parts) <= 2 or parts[1] == "layers"
    return under(name, SHARED_OF_APPS)


def project_modules() -> dict[str, list[str]]:
    """Every application module and the project modules it imports (functions included)."""
    paths = {
        module_name(path): path
        for package in PROJECT
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    }

    def resolved(name: str) -> str:  # ``from a import b``: module a.b, or a's name b
        return name if name in paths else name.rsplit(".", 1)[0]

    return {
        module: sorted(
            {resolved(n) for n in imports(path) if n.split(".")[0] in PROJECT}
        )
        for module, path in paths.items()
    }


def test_worker_folders_import_only_the_worker_side_and_the_shared_modules() -> None:
    modules = project_modules()
    offenders = [
        f"{module}: {name}"
        for module, names in modules.items()
        if worker_side(module)
        for name in names
        if not (worker_side(name) or shared(name) or name == "gateway")
    ]
    assert offenders == []


def test_nothing_but_the_wiring_imports_a_worker_folder() -> None:
    modules = project_modules()
    offenders = [
        f"{module}: {name}"
        for module, names in modules.items()
        if not worker_side(module) and not under(module, WIRING)
        for name in names
        if worker_side(name)
    ]
    assert offenders == []


def test_shared_modules_import_only_shared_modules() -> None:
    modules = project_modules()
    offenders = [
        f"{module}: {name}"
        for module, names in modules.items()
        if shared(module)
        for name in names
        if not shared(name) and not under(name, ("gateway.server.middleware",))
    ]
    assert offenders == []


def test_the_gateway_side_reaches_no_worker_module() -> None:
    reached = set().union(*(reachable_modules(r, PROJECT) for r in GATEWAY_ROOTS))
    assert {"tts.consumers", "openai_rest.speech", "accounts.admission"} <= reached
    assert sorted(m for m in reached if worker_side(m)) == []


def test_worker_never_imports_accounts_consumers_or_views() -> None:
    """STYLE 33: nor the job link, the server's concerns or the OpenAI REST app."""
    reached = reachable_modules("veena_site.worker", PROJECT)
    assert "tts.worker.jobs" in reached and "asr.worker.jobs" in reached
    gateway_only = ("accounts", "openai_rest", "gateway.link", "gateway.server")
    offenders = [
        m
        for m in reached
        if under(m, gateway_only) or m.rsplit(".", 1)[-1] in ("consumers", "views")
    ]
    assert offenders == []


def test_openai_rest_imports_no_views_module_of_another_app() -> None:
    """Issue 33: ``openai_rest`` uses the apps' services (``tts.requests``, ``tts.speakers``,
    ``accounts.admission``, ``gateway.logs``), never a view module of theirs."""
    modules = project_modules()
    assert "tts.requests" in modules["openai_rest.speech"]
    offenders = [
        f"{module}: {name}"
        for module, names in modules.items()
        if under(module, ("openai_rest",))
        for name in names
        if not under(name, ("openai_rest",)) and "views" in name.split(".")
    ]
    assert offenders == []


@pytest.mark.parametrize(
    ("module", "worker"),
    [("gateway.worker.jobs", True), ("asr.worker", True), ("tts.messages", False)],
)
def test_worker_side_is_told_by_the_folder(module: str, worker: bool) -> None:
    assert worker_side(module) is worker


def test_gateway_import_does_not_load_engines() -> None:
    """piper-tts is GPL and heavy: importing the gateway loads no engine (engines §1.7)."""
    code = (
        "import sys, django; django.setup(); import veena_site.asgi; "
        "print(sorted(m for m in ('piper', 'faster_whisper', 'onnxruntime', 'ctranslate2') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=child_env(DJANGO_SETTINGS_MODULE="tests.settings"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"
