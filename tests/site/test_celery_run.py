"""Celery beat under SIGTERMs that keep coming while it exits (veena_site.celery_run).

On a SIGTERM to the process group, each child of ``manage.py serve`` gets it, and the
supervisor then forwards one more: beat raised ``SystemExit`` from its handler again while
the interpreter shut down, and printed a traceback (seen in the drain test under load).
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, child_env
from veena_site.management.commands.serve import role_commands

pytestmark = [pytest.mark.redis]


def beat(redis_url: str, tmp_path: Path) -> subprocess.Popen[str]:
    """Celery beat started as ``manage.py serve`` starts it, its schedule in ``tmp_path``."""
    (argv,) = role_commands(["beat"], "127.0.0.1", 0, 0)
    assert argv[1:3] == ["-m", "veena_site.celery_run"], argv
    argv[argv.index("-s") + 1] = str(tmp_path / "celerybeat-schedule")
    env = child_env(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATA_DIR=str(tmp_path),
        REDIS_URL=redis_url,
    )
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def terminated_again_and_again(proc: subprocess.Popen[str]) -> str:
    """SIGTERM every 2 ms from the first until the process has exited; its output."""
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            break
        time.sleep(0.002)
    out, _ = proc.communicate(timeout=30)
    return out


def wait_started(proc: subprocess.Popen[str]) -> None:
    """Until beat says it is starting (its scheduler, and the signal handler, are set)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "beat: Starting" in line:
            time.sleep(0.5)
            return
        assert line, "beat ended before it started"
    raise AssertionError("beat did not start within 60 s")


def test_beat_exits_quietly_however_many_sigterms_come(
    redis_url: str, tmp_path: Path
) -> None:
    for round_ in range(3):
        proc = beat(redis_url, tmp_path / str(round_))
        wait_started(proc)
        out = terminated_again_and_again(proc)
        assert "Traceback" not in out, out[-4000:]
        assert proc.returncode == 0, out[-4000:]
