"""Gateway shutdown: live streams are told (1001), then the process exits cleanly."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import websockets

from tests.conftest import ROOT, child_env, free_port
from tests.e2e.test_serve import wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def gateway_env(tmp_path: Path) -> dict[str, str]:
    return child_env(
        DJANGO_SETTINGS_MODULE="tests.settings", DATA_DIR=str(tmp_path), TTS_DRAIN_S="5"
    )


def prepare(tmp_path: Path) -> str:
    env = gateway_env(tmp_path)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    out = subprocess.run(
        [sys.executable, "manage.py", "create_api_key", "--account", "down"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().splitlines()[-1]


async def test_sigterm_closes_live_realtime_sessions_with_1001_and_exits(
    tmp_path: Path,
) -> None:
    key = prepare(tmp_path)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "rungateway", "--port", str(port)],
        cwd=ROOT,
        env=gateway_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_ready(port, proc)  # type: ignore[arg-type]
        headers = {"Authorization": f"Bearer {key}"}
        async with websockets.connect(
            f"ws://127.0.0.1:{port}/v1/realtime", additional_headers=headers
        ) as ws:
            assert json.loads(await ws.recv())["type"] == "session.created"
            proc.send_signal(signal.SIGTERM)
            started = time.monotonic()
            with pytest.raises(websockets.ConnectionClosed):
                while True:
                    await asyncio.wait_for(ws.recv(), 10)
            assert ws.close_code == 1001
        assert proc.wait(timeout=10) == 0
        assert time.monotonic() - started < 8
    finally:
        if proc.poll() is None:
            proc.kill()


async def test_idle_gateway_stops_at_once(tmp_path: Path) -> None:
    prepare(tmp_path)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "rungateway", "--port", str(port)],
        cwd=ROOT,
        env=gateway_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_ready(port, proc)  # type: ignore[arg-type]
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 0
    assert time.monotonic() - started < 3
