"""One embedded server per data directory (issue 9 item 8).

A second embedded server on a ``DATA_DIR`` in use refuses to start with one clear line; the
claim is a ``flock`` that the kernel drops when its holder ends, ``kill -9`` included.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, child_env, free_port
from tests.support.services import project_env, run_manage, start_gateway, wait_ready

HOLD = (
    "import sys, time, django; django.setup(); "
    "from pathlib import Path; from veena_site.embedded import claim_data_dir; "
    "claim_data_dir(Path(sys.argv[1])); print('held', flush=True); time.sleep(600)"
)


def holder(data_dir: Path) -> subprocess.Popen[str]:
    """A process that claims ``data_dir`` and keeps it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(data_dir)],
        cwd=ROOT,
        env=child_env(DJANGO_SETTINGS_MODULE="tests.settings", DATA_DIR=str(data_dir)),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def serve_once(data_dir: Path) -> subprocess.CompletedProcess[str]:
    """``manage.py serve`` (embedded) that is expected to refuse at once."""
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "serve", "--port", str(free_port())],
        cwd=ROOT,
        env=project_env(data_dir),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_second_embedded_server_refuses_the_data_dir_with_one_line(
    tmp_path: Path,
) -> None:
    first = holder(tmp_path)
    try:
        second = serve_once(tmp_path)
    finally:
        first.kill()  # kill -9: the lock must not outlive it
        first.wait(timeout=10)
    assert second.returncode == 1
    lines = [line for line in second.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, second.stderr
    assert f"pid {first.pid}" in lines[0] and str(tmp_path.resolve()) in lines[0]
    assert "is running on DATA_DIR" in lines[0]
    assert "Traceback" not in second.stderr
    holder(tmp_path).kill()  # free again once its holder was killed


@pytest.mark.slow
def test_a_running_embedded_gateway_holds_its_data_dir(tmp_path: Path) -> None:
    env = project_env(tmp_path)
    run_manage("migrate", "--noinput", env=env)
    port = free_port()
    gateway = start_gateway(env, port, tmp_path / "gateway.log")
    try:
        wait_ready(port, gateway)
        second = serve_once(tmp_path)
        assert second.returncode == 1 and f"pid {gateway.pid}" in second.stderr
        assert gateway.alive()
    finally:
        gateway.kill()
    holder(tmp_path).kill()  # kill -9 of the gateway left no stale lock
