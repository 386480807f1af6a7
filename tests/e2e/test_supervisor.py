"""The distributed ``serve`` restarts a child that exits, with backoff, and gives up only on
one that cannot start (issue 9: one failing child no longer takes the deployment down)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from veena_site import supervisor as module
from veena_site.supervisor import Supervisor


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short backoff, so each case takes seconds (QUICK_EXIT_S stays 10 s: a Python
    child can take a second to start on a loaded machine)."""
    monkeypatch.setattr(module, "RESTART_FIRST_S", 0.05)
    monkeypatch.setattr(module, "RESTART_MAX_S", 0.2)
    monkeypatch.setattr(module, "POLL_S", 0.02)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code, "child"]


def run_for(supervisor: Supervisor, seconds: float) -> int:
    timer = threading.Timer(seconds, lambda: setattr(supervisor, "stopping", True))
    timer.start()
    try:
        return supervisor.run()
    finally:
        timer.cancel()
        supervisor.stop(grace_s=5)


def test_a_child_that_exits_after_running_is_restarted(
    quick: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, "QUICK_EXIT_S", 0.3)  # the child runs 0.4 s and more
    starts = tmp_path / "starts"
    crashing = python(
        f"import time; open({str(starts)!r}, 'a').write('x'); time.sleep(0.4); raise SystemExit(3)"
    )
    steady = python("import time; time.sleep(30)")
    supervisor = Supervisor([crashing, steady])
    assert run_for(supervisor, 3.0) == 0
    crashed, kept = supervisor.children
    assert crashed.restarts >= 1 and len(starts.read_text()) >= 2
    assert kept.restarts == 0 and kept.proc is not None
    assert kept.proc.poll() is not None  # stopped with the others at the end


def test_a_child_that_cannot_start_stops_the_command(quick: Any) -> None:
    supervisor = Supervisor(
        [python("raise SystemExit(2)"), python("import time; time.sleep(30)")]
    )
    assert run_for(supervisor, 10.0) == 1
    assert supervisor.children[0].restarts == module.GIVE_UP_AFTER - 1
