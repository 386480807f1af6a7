"""``make serve`` smoke tests: a fresh data directory, /readyz within 60 s, a real request, a clean stop."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import websockets

from tests.conftest import ROOT, child_env, free_port

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def wait_ready(
    port: int,
    proc: subprocess.Popen[bytes],
    limit_s: float = 60,
    tls: ssl.SSLContext | None = None,
) -> dict[str, object]:
    scheme = "https" if tls else "http"
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "make serve exited before it was ready"
        try:
            with urllib.request.urlopen(
                f"{scheme}://127.0.0.1:{port}/readyz", timeout=2, context=tls
            ) as resp:
                return json.loads(resp.read())
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)
    raise AssertionError(f"/readyz not true within {limit_s} s")


def stop(proc: subprocess.Popen[bytes], limit_s: float = 20) -> int:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        return proc.wait(timeout=limit_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def serve(tmp_path: Path, port: int, **env: str) -> subprocess.Popen[bytes]:
    environment = child_env(
        DJANGO_SETTINGS_MODULE="veena_site.settings",
        DATA_DIR=str(tmp_path),
        PORT=str(port),
        HOST="127.0.0.1",
        **env,
    )
    for name in ("TTS_ENGINE", "ASR_ENGINE"):
        environment.pop(name, None)
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(
        ["make", "-s", "serve"],
        cwd=ROOT,
        env=environment,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def mint_key(tmp_path: Path, **env: str) -> str:
    out = subprocess.run(
        [
            str(ROOT / ".venv/bin/python"),
            "manage.py",
            "create_api_key",
            "--account",
            "smoke",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=child_env(
            DJANGO_SETTINGS_MODULE="veena_site.settings", DATA_DIR=str(tmp_path), **env
        ),
    )
    return out.stdout.strip().splitlines()[-1]


async def speak_and_listen(port: int, key: str) -> None:
    """A real TTS request (Piper) and a realtime session (faster-whisper) against the service."""
    headers = {"Authorization": f"Bearer {key}"}
    async with websockets.connect(
        f"ws://127.0.0.1:{port}/v1/tts/ws", additional_headers=headers
    ) as ws:
        await ws.send(json.dumps({"text": "The gateway is ready.", "format": "pcm"}))
        header = json.loads(await ws.recv())
        assert (
            header["event"] == "header"
            and header["model_version"] == "piper/en_US-joe-medium"
        )
        audio = 0
        while True:
            msg = await ws.recv()
            if isinstance(msg, bytes):
                audio += len(msg)
            elif json.loads(msg)["event"] == "complete":
                break
        assert audio > 16000  # more than half a second of 16 kHz PCM16
    async with websockets.connect(
        f"ws://127.0.0.1:{port}/v1/realtime",
        additional_headers=headers,
        subprotocols=["realtime"],
    ) as ws:
        assert ws.subprotocol == "realtime"
        assert json.loads(await ws.recv())["type"] == "session.created"


async def test_make_serve_embedded(tmp_path: Path) -> None:
    port = free_port()
    proc = serve(tmp_path, port)
    try:
        ready = wait_ready(port, proc)
        assert ready["topology"] == "embedded" and ready["workers"] == {
            "tts": 1,
            "asr": 1,
        }
        await speak_and_listen(port, mint_key(tmp_path))
    finally:
        code = stop(proc)
    assert code == 0 or code == -signal.SIGTERM, (tmp_path / "serve.log").read_text()[
        -2000:
    ]


@pytest.mark.redis
async def test_make_serve_distributed(tmp_path: Path, redis_url: str) -> None:
    port = free_port()
    env = {"REDIS_URL": redis_url, "CHANNEL_PREFIX": f"serve-{uuid.uuid4().hex[:6]}"}
    proc = serve(tmp_path, port, **env)
    try:
        ready = wait_ready(port, proc)
        assert ready["topology"] == "distributed" and ready["workers"]["tts"] >= 1
        await speak_and_listen(port, mint_key(tmp_path, **env))
    finally:
        code = stop(proc)
    assert code in (0, 1, -signal.SIGTERM), (tmp_path / "serve.log").read_text()[-2000:]


MIGRATE = (
    "import django; django.setup(); "
    "from veena_site.management.commands.serve import migrate; migrate()"
)


@pytest.mark.postgres
def test_machines_starting_together_migrate_one_after_another(
    postgres_url: str, tmp_path: Path
) -> None:
    """Three ``serve`` start-ups on one fresh database: each migrates, none races (advisory lock)."""
    import psycopg

    name = f"veena_m_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    env = child_env(
        DJANGO_SETTINGS_MODULE="veena_site.settings",
        DATABASE_URL=postgres_url.rsplit("/", 1)[0] + "/" + name,
        DATA_DIR=str(tmp_path),
    )
    try:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", MIGRATE],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for _ in range(3)
        ]
        results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
        assert [code for code, _ in results] == [0, 0, 0], results
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_serve_with_an_unreachable_redis_fails_at_once_without_the_password(
    tmp_path: Path,
) -> None:
    url = f"redis://:hunter2-secret@127.0.0.1:{free_port()}/0"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "manage.py", "serve"],
        cwd=ROOT,
        env=child_env(
            DJANGO_SETTINGS_MODULE="veena_site.settings",
            DATA_DIR=str(tmp_path),
            REDIS_URL=url,
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "REDIS_URL (127.0.0.1:" in done.stderr and "does not answer" in done.stderr
    assert "hunter2" not in done.stdout + done.stderr
    assert time.monotonic() - started < 30
