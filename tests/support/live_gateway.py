"""A live ``manage.py rungateway`` child (embedded topology) with a minted key, for SDK tests."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import websockets
from openai import AsyncOpenAI

from tests.asr.conftest import Clip, b64, silence
from tests.conftest import ROOT, child_env, free_port, manage
from tests.wer import word_error_rate

DELTA = "conversation.item.input_audio_transcription.delta"
COMPLETED = "conversation.item.input_audio_transcription.completed"


class Gateway:
    """A running ``manage.py rungateway`` child and a key for it."""

    def __init__(
        self, port: int, key: str, proc: subprocess.Popen[bytes], log: Path
    ) -> None:
        self.port, self.key, self.proc, self.log = port, key, proc, log

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/realtime"


def wait_ready(gw: Gateway, limit_s: float = 60) -> None:
    """Wait for ``/readyz`` to report a live ASR worker."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert gw.proc.poll() is None, gw.log.read_text()[-3000:]
        try:
            with urllib.request.urlopen(gw.http + "/readyz", timeout=2) as resp:
                if json.loads(resp.read()).get("workers", {}).get("asr"):
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.3)
    raise AssertionError("gateway not ready: " + gw.log.read_text()[-3000:])


def asr_gateway(
    data: Path, *, ready_s: float = 60, **overrides: str
) -> Iterator[Gateway]:
    """Migrate, mint a key, start an ASR-only gateway; stop it afterwards."""
    env = child_env(
        DJANGO_SETTINGS_MODULE="veena_site.settings",
        DATA_DIR=str(data),
        WORKER_KINDS="asr",
        GATEWAY_KINDS="asr",
        ASR_WORKER_SLOTS="1",
        ENGINE_THREADS="2",
    )
    for name in ("TTS_ENGINE", "ASR_ENGINE"):
        env.pop(name, None)
    env.update(overrides)
    python = str(ROOT / ".venv/bin/python")
    run = {"cwd": ROOT, "env": env, "check": True, "capture_output": True}
    subprocess.run([python, "manage.py", "migrate", "--noinput"], **run)  # type: ignore[call-overload]
    minted = subprocess.run(  # type: ignore[call-overload]
        [python, "manage.py", "create_api_key", "--account", "asr-e2e"],
        text=True,
        **run,
    )
    key = minted.stdout.strip().splitlines()[-1]
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
    gw = Gateway(port, key, proc, log)
    try:
        wait_ready(gw, ready_s)
        yield gw
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    assert gw.key not in log.read_text()


async def sdk_transcribe(
    gw: Gateway,
    audio: bytes,
    fmt: dict[str, Any],
    chunk: int,
    *,
    pace_s: float = 0.0,
    timeout: float = 30,
    transcription: dict[str, Any] | None = None,
    include: list[str] | None = None,
) -> tuple[list[str], list[Any]]:
    """The realtime §16 client, with AsyncOpenAI: returns event types and the events.

    ``pace_s`` waits between appends (0: as fast as the socket takes them);
    ``transcription`` adds options to the session's, ``include`` is the session's.
    """
    client = AsyncOpenAI(base_url=gw.http + "/v1", api_key=gw.key)
    events: list[Any] = []
    options = {"model": "whisper-1", "language": "en", **(transcription or {})}
    async with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        await conn.session.update(
            session={
                "type": "transcription",
                "audio": {
                    "input": {
                        "format": fmt,  # type: ignore[typeddict-item]
                        "transcription": options,  # type: ignore[typeddict-item]
                        "turn_detection": None,
                    }
                },
                "include": include,  # type: ignore[typeddict-item]
            }
        )
        for i in range(0, len(audio), chunk):
            await conn.input_audio_buffer.append(audio=b64(audio[i : i + chunk]))
            await asyncio.sleep(pace_s)
        await conn.input_audio_buffer.commit()
        async with asyncio.timeout(timeout):
            async for event in conn:
                events.append(event)
                assert event.type != "error", event
                if event.type == "conversation.item.done":
                    break
    return [e.type for e in events], events


def assert_transcribed(reference: str, transcript: str, label: str) -> None:
    """Word error rate ≤ 15 % (realtime §17), printed for the test log."""
    wer = word_error_rate(reference, transcript)
    print(f"WER {label}: {wer:.3f} ({transcript!r})")
    assert wer <= 0.15


def check_flow(kinds: list[str], events: list[Any], *, joined: bool = False) -> str:
    """The GA flow of one item: the transcript; with ``joined`` (the session option
    ``transcript: "deltas"``) the deltas must join to it exactly, else they are its
    preview (issue 34)."""
    assert kinds[:2] == ["session.created", "session.updated"]
    rest = [k for k in kinds[2:] if k != DELTA]
    assert rest == [
        "input_audio_buffer.committed",
        "conversation.item.added",
        COMPLETED,
        "conversation.item.done",
    ]
    assert kinds.index(DELTA) < kinds.index(COMPLETED)
    completed = next(e for e in events if e.type == COMPLETED)
    item_id = completed.item_id
    deltas = [e.delta for e in events if e.type == DELTA]
    assert all(e.item_id == item_id for e in events if e.type == DELTA)
    assert all(deltas)
    if joined:
        assert "".join(deltas) == completed.transcript
    return str(completed.transcript)


async def server_vad_two_utterances(
    gateway: Gateway, clips: dict[str, Clip], timeout: float = 30
) -> None:
    """Server VAD commits two utterances by itself; both transcribe (realtime VD-5)."""
    headers = {"Authorization": f"Bearer {gateway.key}"}
    audio = (
        silence(0.5)
        + clips["clip"].bytes_at(24000)
        + silence(1.2)
        + clips["clip2"].bytes_at(24000)
        + silence(1.2)
    )
    async with websockets.connect(gateway.ws, additional_headers=headers) as ws:
        assert json.loads(await ws.recv())["type"] == "session.created"
        await ws.send(
            json.dumps(
                {
                    "type": "session.update",
                    "session": {
                        "type": "transcription",
                        "audio": {
                            "input": {
                                "turn_detection": {"type": "server_vad"},
                                "transcription": {"language": "en"},
                            }
                        },
                    },
                }
            )
        )
        for i in range(0, len(audio), 4800):
            await ws.send(
                json.dumps(
                    {
                        "type": "input_audio_buffer.append",
                        "audio": b64(audio[i : i + 4800]),
                    }
                )
            )
        events = []
        async with asyncio.timeout(timeout):
            while sum(e["type"] == "conversation.item.done" for e in events) < 2:
                events.append(json.loads(await ws.recv()))
    assert not [e for e in events if e["type"] == "error"]
    completed = [e for e in events if e["type"] == COMPLETED]
    assert len(completed) == 2 and completed[0]["item_id"] != completed[1]["item_id"]
    assert word_error_rate(clips["clip"].text, completed[0]["transcript"]) <= 0.15
    assert word_error_rate(clips["clip2"].text, completed[1]["transcript"]) <= 0.15
    assert sum(e["type"] == "input_audio_buffer.speech_stopped" for e in events) == 2
