"""STYLE 33: the worker never imports ``accounts`` (walked statically over project modules)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT, child_env
from tests.support.sources import reachable_modules

PROJECT = ("veena_site", "tts", "asr", "accounts")


def test_worker_never_imports_accounts() -> None:
    reached = reachable_modules("veena_site.worker", PROJECT)
    assert "tts.worker.jobs" in reached and "asr.worker.jobs" in reached
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
