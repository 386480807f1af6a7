"""Hostile clients against a real gateway (issue 31): raw sockets and real uploads.

One ``rungateway`` (embedded, fake engines) per module with short limits. Uploads over the
limit are answered 413 before their body is read (declared or chunked); truncated and
non-audio files are 400 in OpenAI's envelope; a small file that decodes to hours is refused
by its length without the gateway's memory growing; a client that sends its headers (or its
WebSocket handshake) slowly, or nothing at all, is dropped; idle sockets, a plan's maximum
session length and its concurrency are enforced as documented (docs/operations.md, "Limits").
"""

from __future__ import annotations

import asyncio
import io
import json
import select
import socket
import time
import uuid
import wave
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from tests.conftest import free_port
from tests.support.services import (
    Service,
    create_planned_key,
    project_env,
    run_manage,
    start_gateway,
    wait_ready,
)
from tests.support.sockets import REALTIME, TTS, Socket, error_code

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

HEADER_TIMEOUT_S = 1.5
IDLE_S = 1.5
MAX_SESSION_S = 3
UPLOAD_CAP = 1024 * 1024
MAX_SECONDS = 60


@dataclass
class Gateway:
    service: Service
    port: int
    keys: dict[str, str]

    def rss_peak_kib(self) -> int:
        status = Path(f"/proc/{self.service.pid}/status").read_text()
        return int(
            next(x for x in status.splitlines() if x.startswith("VmHWM")).split()[1]
        )


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    data = tmp_path_factory.mktemp("hostile")
    env = project_env(
        data,
        HTTP_HEADER_TIMEOUT_S=str(HEADER_TIMEOUT_S),
        TTS_REQUEST_TIMEOUT_S=str(IDLE_S),
        ASR_IDLE_TIMEOUT_S=str(IDLE_S),
        ASR_MAX_SESSION_S=str(MAX_SESSION_S),
        OPENAI_TRANSCRIBE_MAX_BYTES=str(UPLOAD_CAP),
        OPENAI_TRANSCRIBE_MAX_SECONDS=str(MAX_SECONDS),
        FAKE_TTS_CHUNK_DELAY_S="0.1",
    )
    run_manage("migrate", "--noinput", env=env)
    keys = {
        "open": create_planned_key(env, "open"),
        "tight": create_planned_key(env, "tight", max_concurrent_streams=1),
    }
    port = free_port()
    service = start_gateway(env, port, data / "gateway.log")
    try:
        wait_ready(port, service, limit_s=90)
        yield Gateway(service, port, keys)
    finally:
        service.stop()
    assert "Traceback" not in service.log.read_text(), service.tail()


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def response(sock: socket.socket, timeout: float = 5) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of the response on ``sock`` (read until it closes)."""
    sock.settimeout(timeout)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def closed_after(sock: socket.socket, trickle: bytes, limit_s: float) -> float:
    """Send ``trickle`` a byte every 0.25 s until the server closes; seconds it took."""
    started = time.monotonic()
    sock.settimeout(0.25)
    for byte in trickle:
        try:
            sock.send(bytes([byte]))
            if sock.recv(1024) == b"":
                break
        except TimeoutError:
            pass
        except (BrokenPipeError, ConnectionResetError):
            break
        assert time.monotonic() - started < limit_s, "the slow client was not dropped"
    return time.monotonic() - started


def upload_head(port: int, key: str, length: str, path: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {key}\r\n"
        "Content-Type: multipart/form-data; boundary=b\r\n"
        f"{length}\r\n\r\n"
    ).encode()


# 413 before the body is read


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/v1/audio/transcriptions", "file_too_large"),
        ("/v1/audio/speech", "request_too_large"),
    ],
)
def test_a_declared_length_over_the_limit_is_413_before_any_body(
    gateway: Gateway, path: str, code: str
) -> None:
    sock = connect(gateway.port)
    length = f"Content-Length: {10 * 1024**3}"  # 10 GiB announced, nothing sent
    sock.sendall(upload_head(gateway.port, gateway.keys["open"], length, path))
    started = time.monotonic()
    status, body = response(sock)
    assert (status, body["error"]["code"]) == (413, code), body
    assert body["error"]["type"] == "invalid_request_error"
    assert time.monotonic() - started < 2


def test_a_chunked_upload_is_413_as_soon_as_it_passes_the_limit(
    gateway: Gateway,
) -> None:
    sock = connect(gateway.port)
    head = upload_head(
        gateway.port,
        gateway.keys["open"],
        "Transfer-Encoding: chunked",
        "/v1/audio/transcriptions",
    )
    sock.sendall(head)
    piece = b"x" * 65536
    sent = 0
    while sent < 20 * UPLOAD_CAP:
        if select.select([sock], [], [], 0)[0]:
            break  # the answer came
        try:
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += len(piece)
        time.sleep(0.005)
    status, body = response(sock)
    assert (status, body["error"]["code"]) == (413, "file_too_large"), body
    assert sent < 3 * UPLOAD_CAP, f"{sent} bytes were taken before the 413"


# Files that are no audio, cut short, or far longer than they look


def wav_bytes(seconds: float) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        tone = np.sin(np.arange(int(seconds * 16000)) / 10) * 3000
        out.writeframes(tone.astype(np.int16).tobytes())
    return buf.getvalue()


def silent_flac(seconds: float, rate: int = 8000) -> bytes:
    """A FLAC of silence: a few bytes a second, whatever its length."""
    buf = io.BytesIO()
    with av.open(buf, "w", format="flac") as out:
        stream = out.add_stream("flac", rate=rate, layout="mono")
        block = np.zeros((1, 4096), dtype=np.int16)
        for _ in range(int(seconds * rate) // 4096):
            frame = av.AudioFrame.from_ndarray(block, format="s16", layout="mono")
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


def transcribe(gateway: Gateway, name: str, data: bytes) -> tuple[int, dict[str, Any]]:
    """``POST /v1/audio/transcriptions`` with ``data`` as the file."""
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n',
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n",
    ]
    body = "".join(parts).encode() + data + f"\r\n--{boundary}--\r\n".encode()
    sock = connect(gateway.port)
    sock.sendall(
        (
            f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            f"Authorization: Bearer {gateway.keys['open']}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body
    )
    return response(sock, timeout=30)


def test_truncated_and_non_audio_files_are_400(gateway: Gateway) -> None:
    whole = wav_bytes(3.0)
    status, body = transcribe(gateway, "whole.wav", whole)
    assert status == 200, body
    for name, data in {
        "cut.wav": whole[: len(whole) // 2],
        "cut-header.wav": whole[:30],
        "notes.txt": b"These are not the samples you are looking for. " * 50,
        "cut.flac": silent_flac(30, 16000)[:-4000],
    }.items():
        status, body = transcribe(gateway, name, data)
        assert status == 400, (name, body)
        assert body["error"]["code"] == "invalid_audio_format", (name, body)
        assert body["error"]["type"] == "invalid_request_error"


def without_length(flac: bytes) -> bytes:
    """The FLAC with its STREAMINFO sample count cleared (allowed: "unknown")."""
    data = bytearray(flac)
    data[8 + 13] &= 0xF0  # the count's top 4 bits share a byte with the sample size
    data[8 + 14 : 8 + 18] = bytes(4)
    return bytes(data)


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "hidden"])
def test_a_decompression_bomb_is_refused_by_its_length(
    gateway: Gateway, declared: bool
) -> None:
    bomb = silent_flac(3600)  # an hour of silence in about 650 KB
    if not declared:  # the length is found out by decoding, up to the cap
        bomb = without_length(bomb)
    assert len(bomb) < UPLOAD_CAP
    peak = gateway.rss_peak_kib()
    started = time.monotonic()
    status, body = transcribe(gateway, "bomb.flac", bomb)
    took = time.monotonic() - started
    assert (status, body["error"]["code"]) == (400, "audio_too_long"), body
    grown_mib = (gateway.rss_peak_kib() - peak) / 1024
    print(
        f"\nHOSTILE bomb ({'declared' if declared else 'hidden'} length): {len(bomb)} B"
        f" of 1 h refused in {took:.2f} s, peak RSS +{grown_mib:.1f} MiB"
    )
    assert took < 5 and grown_mib < 40


# Slow clients


def test_slow_headers_and_silent_connections_are_dropped(gateway: Gateway) -> None:
    slow = connect(gateway.port)
    slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    took = closed_after(slow, b"X-Slow: " + b"a" * 200, HEADER_TIMEOUT_S + 3)
    assert took < HEADER_TIMEOUT_S + 1
    silent = connect(gateway.port)
    silent.settimeout(HEADER_TIMEOUT_S + 3)
    try:
        assert silent.recv(1) == b""  # closed by the server, nothing sent
    except ConnectionResetError:
        pass  # aborted by the server
    print(f"\nHOSTILE slowloris: dropped after {took:.2f} s")


def test_a_slow_websocket_handshake_is_dropped(gateway: Gateway) -> None:
    slow = connect(gateway.port)
    slow.sendall(
        b"GET /v1/tts/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
    )
    took = closed_after(slow, b"Sec-WebSocket-Key: " + b"a" * 200, HEADER_TIMEOUT_S + 3)
    assert took < HEADER_TIMEOUT_S + 1


def test_normal_keep_alive_requests_still_work(gateway: Gateway) -> None:
    sock = connect(gateway.port)
    for _ in range(3):
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        sock.settimeout(5)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        time.sleep(HEADER_TIMEOUT_S / 3)


# Idle sockets, session length and concurrency beyond the plan


async def outcome(sock: Socket, limit_s: float) -> tuple[str | None, int | None]:
    await sock.wait_closed(limit_s)
    codes = [c for c in map(error_code, sock.events) if c]
    return (codes[0] if codes else None), sock.close_code


async def test_idle_sockets_session_length_and_concurrency_are_enforced(
    gateway: Gateway,
) -> None:
    port, keys = gateway.port, gateway.keys
    idle_tts = await Socket.open(port, TTS, keys["open"])
    idle_realtime = await Socket.open(port, REALTIME, keys["open"])
    busy = await Socket.open(port, REALTIME, keys["open"])
    only = await Socket.open(port, TTS, keys["tight"])
    await only.send({"event": "ping"})  # admitted: the plan's one stream
    await only.wait(lambda: bool(only.events), 5, "no pong")
    second = await Socket.open(port, REALTIME, keys["tight"])

    async def keep_busy() -> None:  # never idle, so only its length can end it
        while not busy.closed:
            await busy.send({"type": "input_audio_buffer.append", "audio": ""})
            await asyncio.sleep(IDLE_S / 4)

    keeping = asyncio.create_task(keep_busy())
    results = await asyncio.gather(
        outcome(idle_tts, IDLE_S + 5),
        outcome(idle_realtime, IDLE_S + 5),
        outcome(second, 5),
        outcome(only, IDLE_S + 5),
        outcome(busy, MAX_SESSION_S + 5),
    )
    keeping.cancel()
    assert results == [
        ("TIMEOUT", 1000),  # no request within TTS_REQUEST_TIMEOUT_S
        ("idle_timeout", 1000),  # ASR_IDLE_TIMEOUT_S
        ("too_many_sessions", 1008),  # the plan's max_concurrent_streams
        ("TIMEOUT", 1000),
        ("session_expired", 1000),  # ASR_MAX_SESSION_S
    ], results
