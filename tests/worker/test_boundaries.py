"""STYLE 33: the worker never imports ``accounts`` (walked statically over project modules)."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.conftest import ROOT, child_env

PROJECT = ("veena_site", "tts", "asr", "accounts")


def imported_modules(module: str) -> set[str]:
    """Every project module reachable by imports from ``module``."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = ROOT / (name.replace(".", "/") + ".py")
        if not path.exists():
            path = ROOT / name.replace(".", "/") / "__init__.py"
        if not path.exists():
            continue
        seen.add(name)
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            todo += [n for n in names if n.split(".")[0] in PROJECT]
    return seen


def test_worker_never_imports_accounts() -> None:
    reached = imported_modules("veena_site.worker")
    assert "tts.jobs" in reached and "asr.jobs" in reached
    assert not [m for m in reached if m.split(".")[0] == "accounts"]


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
