"""Issue 9 item 4 through a live Daphne: a TTS client that stops reading pauses its worker
instead of making the gateway hold the request's audio, and one that never resumes is closed.

The gateway runs as ``manage.py rungateway`` (embedded topology, fake engine, auth off); the
client shrinks its socket receive buffer so the kernel cannot absorb the audio either. The
request is 50,000 characters at 48 kHz: 500 s of audio, 48 MB of PCM.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.sync.client import ClientConnection, connect

from tests.conftest import child_env, free_port, manage

pytestmark = pytest.mark.slow

TEXT = "Hello world, this is a long request. " * 1351  # 49,987 characters
RATE = 48_000
STALL_S = 8.0


class LiveGateway:
    def __init__(self, port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.port, self.proc, self.log = port, proc, log

    def rss_mb(self) -> float:
        """Resident memory of the gateway process."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("VmRSS:"))
        return int(line.split()[1]) / 1024

    def metric(self, name: str, labels: str) -> float:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.port}/metrics", timeout=5
        ) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith(f"{name}{{{labels}}}"):
                    return float(line.rsplit(" ", 1)[1])
        return 0.0

    def client(self) -> ClientConnection:
        """A client whose kernel receive buffer is 4 KiB."""
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", self.port))
        return connect(
            f"ws://127.0.0.1:{self.port}/v1/tts/ws",
            sock=sock,
            max_size=None,
            open_timeout=10,
        )


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveGateway]:
    data = tmp_path_factory.mktemp("slow-reader")
    env = child_env(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATA_DIR=str(data),
        TTS_AUTH_REQUIRED="false",
        WORKER_KINDS="tts",
        GATEWAY_KINDS="tts",
        TTS_CLIENT_STALL_S=STALL_S,
    )
    migrate = manage("migrate", "--noinput", env=env, stdout=subprocess.DEVNULL)
    assert migrate.wait(timeout=120) == 0
    port = free_port()
    log = data / "gateway.log"
    with open(log, "wb") as out:
        proc = manage(
            "rungateway",
            "--port",
            str(port),
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    gw = LiveGateway(port, proc, log)
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/readyz", timeout=2
            ) as resp:
                if json.loads(resp.read())["workers"].get("tts"):
                    break
        except OSError:
            pass
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)
    try:
        yield gw
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "Traceback" not in log.read_text()


def request() -> str:
    return json.dumps({"text": TEXT, "format": "pcm", "sample_rate": RATE})


def test_i9_4_a_client_that_stops_reading_pauses_the_worker(
    gateway: LiveGateway,
) -> None:
    with gateway.client() as ws:
        ws.send(json.dumps({"text": "Warm up.", "format": "pcm", "sample_rate": RATE}))
        while not isinstance(message := ws.recv(timeout=10), str) or (
            json.loads(message)["event"] != "complete"
        ):
            pass
    before = gateway.rss_mb()
    with gateway.client() as ws:
        ws.send(request())
        peak = before
        for _ in range(int(STALL_S * 0.6 / 0.25)):  # read nothing for 60 % of the limit
            time.sleep(0.25)
            peak = max(peak, gateway.rss_mb())
        received, complete = 0, None
        while complete is None:
            message = ws.recv(timeout=30)
            if isinstance(message, bytes):
                received += len(message)
            elif json.loads(message)["event"] == "complete":
                complete = json.loads(message)["metrics"]
    growth = peak - before
    print(f"\ngateway RSS growth while the client read nothing: {growth:.1f} MB")
    assert complete["total_bytes"] == received
    assert received > 40_000_000  # the whole request arrived in the end
    assert growth < 8, f"the gateway buffered {growth:.1f} MB of unsent audio"


def test_i9_4_a_client_that_never_reads_again_is_closed(gateway: LiveGateway) -> None:
    timeouts = gateway.metric("veena_errors_total", 'code="TIMEOUT",endpoint="tts"')
    with gateway.client() as ws:
        ws.send(request())
        deadline = time.monotonic() + STALL_S + 10
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = gateway.metric("veena_errors_total", 'code="TIMEOUT",endpoint="tts"')
            if now > timeouts and not gateway.metric(
                "veena_active_streams", 'endpoint="tts"'
            ):
                break
        else:
            pytest.fail("the stalled stream was not closed")
