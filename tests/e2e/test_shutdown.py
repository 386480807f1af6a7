"""Gateway shutdown: live streams are told (1001), then the process exits cleanly."""

from __future__ import annotations

import asyncio
import json
import os
import re
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


# SIGTERM to the whole process group of the documented `serve` unit (issue 31)

UNIT_HEADER = re.compile(r"^# /etc/systemd/system/(\S+)", re.M)
DRAIN_S = 4.0
FINISHES, OUTLASTS = (
    "f" * 200,
    "o" * 1500,
)  # 2 s and 15 s of fake audio at 0.1 s a chunk


def documented_units() -> dict[str, dict[str, list[str]]]:
    """Every systemd unit in docs/deploy.md: its name → key → values, in order."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    units: dict[str, dict[str, list[str]]] = {}
    for block in re.findall(r"```ini\n(.*?)```", text, re.S):
        name = UNIT_HEADER.search(block)
        if name is None:
            continue
        keys = units.setdefault(name[1], {})
        for line in block.splitlines():
            if "=" in line and not line.startswith(("#", "[")):
                key, _, value = line.partition("=")
                keys.setdefault(key.strip(), []).append(value.strip())
    return units


def unit_command(unit: dict[str, list[str]], env: dict[str, str]) -> list[str]:
    """The unit's ``ExecStart`` as this checkout runs it, its ``Environment=`` in ``env``."""
    for assignment in " ".join(unit.get("Environment", [])).split():
        key, _, value = assignment.partition("=")
        env.setdefault(key, value)
    (command,) = unit["ExecStart"]
    program, *args = command.split()
    assert program == "/opt/veena/.venv/bin/python", command
    return [sys.executable, *args]


def test_documented_units_give_the_drain_its_time() -> None:
    from gateway.server.lifecycle import stop_seconds

    units = documented_units()
    for name in ("veena-gateway@.service", "veena-worker@.service"):
        assert float(units[name]["TimeoutStopSec"][0]) > stop_seconds(), name
    serve = units["veena.service"]
    assert float(serve["TimeoutStopSec"][0]) > stop_seconds() + 3
    assert serve.get("KillMode", ["control-group"]) == ["control-group"]


async def test_sigterm_to_the_serve_units_group_drains(tmp_path: Path) -> None:
    """systemd's ``KillMode=control-group`` stop: SIGTERM to the supervisor, the gateway and
    both workers at once. A running request finishes, one longer than the drain gets
    1001, a realtime session 1001, new connections 1013 / 503; the group is gone in time."""
    from tests.support.private_redis import PrivateRedis
    from tests.support.services import create_key, get_json, project_env, run_manage
    from tests.support.sockets import REALTIME, TTS, Socket, typed

    server = PrivateRedis(tmp_path / "redis.log")
    server.start()
    port = free_port()
    env = project_env(
        tmp_path,
        REDIS_URL=server.url,
        HOST="127.0.0.1",
        PORT=str(port),
        SERVE_WORKERS="2",
        TTS_DRAIN_S=str(DRAIN_S),
        FAKE_TTS_CHUNK_DELAY_S="0.1",
    )
    unit = documented_units()["veena.service"]
    command = unit_command(unit, env)
    run_manage("migrate", "--noinput", env=env)
    _, raw = create_key(env)
    log = tmp_path / "serve.log"
    proc = subprocess.Popen(
        command,
        cwd=unit["WorkingDirectory"][0].replace("/opt/veena", str(ROOT)),
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, as the unit's cgroup
    )
    try:
        wait_ready(port, proc, limit_s=120)
        finishes, outlasts = [await Socket.open(port, TTS, raw) for _ in range(2)]
        await finishes.send({"text": FINISHES, "format": "pcm"})
        await outlasts.send({"text": OUTLASTS, "format": "pcm"})
        realtime = await Socket.open(port, REALTIME, raw)
        for sock in (finishes, outlasts):
            await sock.event(typed("header"))
        await realtime.event(typed("session.created"))
        os.killpg(proc.pid, signal.SIGTERM)
        stopped = time.monotonic()
        await asyncio.sleep(0.5)
        refused = await Socket.open(port, TTS, raw)
        assert await refused.wait_closed(5) == 1013
        assert refused.events[0]["error"]["code"] == "STREAMING_OVERLOADED"
        status, body = await asyncio.to_thread(get_json, port, "/readyz")
        assert (status, body["error"]["code"]) == (503, "service_unavailable")
        assert await realtime.wait_closed(5) == 1001
        await finishes.event(typed("complete"), 10)
        assert await finishes.wait_closed(5) == 1000
        assert finishes.frames * 100 >= len(FINISHES) * 10  # every 100 ms frame came
        assert await outlasts.wait_closed(DRAIN_S + 5) == 1001
        error = outlasts.events[-1]["error"]
        assert (error["code"], error["message"]) == (
            "INTERNAL_ERROR",
            "server shutting down",
        )
        drained_in = time.monotonic() - stopped
        assert await asyncio.to_thread(proc.wait, DRAIN_S + 20) == 0
        exited_in = time.monotonic() - stopped
        with pytest.raises(ProcessLookupError):
            os.killpg(proc.pid, 0)  # no process of the group is left
        print(
            f"\nSHUTDOWN group SIGTERM: drained in {drained_in:.2f} s, exited in "
            f"{exited_in:.2f} s (TTS_DRAIN_S {DRAIN_S:g})"
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        server.kill()
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-6000:]
