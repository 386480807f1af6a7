"""Record one real session per protocol, as the transcripts of ``docs/*-protocol.md``.

Each session runs through the real ASGI application with the embedded worker on the real
engines (Piper, faster-whisper). A transcript is a list of lines ``C→S …`` / ``S→C …``: JSON
events as sent, binary frames as ``<binary N bytes>`` (runs of equal sizes folded into
``× k``), base64 audio elided, and the close. ``shape`` reduces a transcript to what must not
drift (event names in order, the keys of each event); ids and timings are free to vary.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import soxr
from channels.testing import WebsocketCommunicator

from gateway.pcm import float_to_pcm16, pcm16_to_float

TTS_TEXT = "Hello from veena. Every frame of this sentence streams as it is made."
BEGIN = "<!-- transcript:{name} begin -->"
END = "<!-- transcript:{name} end -->"

Line = tuple[
    str, Any
]  # ("C→S" | "S→C", dict | bytes | ("close", code) | ("closed", code))


def bearer(raw: str) -> list[tuple[bytes, bytes]]:
    """An Authorization header."""
    return [(b"authorization", b"Bearer " + raw.encode())]


class Recorder:
    """A WebsocketCommunicator that logs both directions."""

    def __init__(self, path: str, key: str) -> None:
        from veena_site.asgi import application

        self.comm = WebsocketCommunicator(application, path, headers=bearer(key))
        self.lines: list[Line] = []

    async def connect(self) -> None:
        connected, _ = await self.comm.connect()
        assert connected

    async def send(self, event: dict[str, Any]) -> None:
        self.lines.append(("C→S", event))
        await self.comm.send_to(text_data=json.dumps(event))

    async def recv(self, timeout: float = 30) -> Any:
        """The next server message: a dict, bytes, or ("close", code)."""
        out = await self.comm.receive_output(timeout=timeout)
        if out["type"] == "websocket.close":
            item: Any = ("close", out.get("code", 1000))
        elif out.get("bytes") is not None:
            item = out["bytes"]
        else:
            item = json.loads(out["text"])
        self.lines.append(("S→C", item))
        return item

    async def until(self, done: Any, timeout: float = 30) -> Any:
        """Receive until ``done(item)`` holds (or the server closes)."""
        while True:
            item = await self.recv(timeout)
            if done(item) or isinstance(item, tuple):
                return item

    async def close(self, code: int = 1000) -> None:
        self.lines.append(("C→S", ("closed", code)))
        await self.comm.disconnect(code)


def _name(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else None


async def record_tts(key: str) -> list[Line]:
    """``/v1/tts/ws``: ping, a stray cancel, one keep-alive request with timestamps, a
    rejected second request, and the client's close."""
    rec = Recorder("/v1/tts/ws", key)
    await rec.connect()
    await rec.send({"event": "ping"})
    await rec.recv()
    await rec.send({"event": "cancel"})
    await rec.recv()
    await rec.send(
        {
            "text": TTS_TEXT,
            "speaker": "male1",
            "format": "wav",
            "sample_rate": 16000,
            "request_id": "doc-1",
            "keep_alive": True,
            "timestamps": True,
        }
    )
    await rec.until(lambda item: _name(item, "event") == "complete")
    await rec.send({"text": "Too fast.", "speed": 4, "request_id": "doc-2"})
    await rec.until(lambda item: _name(item, "event") == "error")
    await rec.close()
    return rec.lines


def tts_speech(lines: Iterable[Line], rate: int) -> bytes:
    """The PCM16 audio of a recorded TTS session at ``rate`` (header frame skipped)."""
    frames = [item for side, item in lines if side == "S→C" and isinstance(item, bytes)]
    pcm = np.frombuffer(b"".join(frames[1:]), dtype="<i2")
    audio = soxr.resample(pcm16_to_float(pcm), 16000, rate)
    return float_to_pcm16(audio).astype("<i2").tobytes()


def _appends(pcm: bytes, chunk: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "input_audio_buffer.append",
            "audio": base64.b64encode(pcm[i : i + chunk]).decode(),
        }
        for i in range(0, len(pcm), chunk)
    ]


async def record_openai(key: str, speech24k: bytes) -> list[Line]:
    """``/v1/realtime``, OpenAI dialect: configure, an early commit, speech, commit, clear."""
    rec = Recorder("/v1/realtime", key)
    await rec.connect()
    await rec.recv()  # session.created
    await rec.send(
        {
            "type": "session.update",
            "event_id": "evt_1",
            "session": {
                "type": "transcription",
                "audio": {
                    "input": {
                        "format": {"type": "audio/pcm", "rate": 24000},
                        "transcription": {"model": "whisper-1", "language": "en"},
                        "turn_detection": None,
                    }
                },
            },
        }
    )
    await rec.recv()  # session.updated
    await rec.send({"type": "input_audio_buffer.commit", "event_id": "evt_2"})
    await rec.recv()  # error: commit_empty
    for event in _appends(speech24k, 24000 * 2 // 2):  # 500 ms per append
        await rec.send(event)
    await rec.send({"type": "input_audio_buffer.commit", "event_id": "evt_3"})
    await rec.until(lambda item: _name(item, "type") == "conversation.item.done")
    await rec.send(_appends(speech24k[:4800], 4800)[0])
    await rec.send({"type": "input_audio_buffer.clear", "event_id": "evt_4"})
    await rec.until(lambda item: _name(item, "type") == "input_audio_buffer.cleared")
    await rec.close()
    return rec.lines


async def record_vllm(key: str, speech16k: bytes) -> list[Line]:
    """``/v1/realtime``, vLLM dialect: validate the model, stream, final commit."""
    rec = Recorder("/v1/realtime?dialect=vllm", key)
    await rec.connect()
    await rec.recv()  # session.created
    await rec.send({"type": "session.update", "model": "whisper-tiny.en"})
    await rec.recv()  # session.updated
    await rec.send({"type": "input_audio_buffer.commit"})
    for event in _appends(speech16k, 16000):  # 500 ms per append
        await rec.send(event)
    await rec.send({"type": "input_audio_buffer.commit", "final": True})
    await rec.until(lambda item: _name(item, "type") == "transcription.done")
    await rec.close()
    return rec.lines


# Rendering.

AUDIO_B64 = re.compile(r'"audio": "([A-Za-z0-9+/=]{12})[A-Za-z0-9+/=]*"')


def _json(event: dict[str, Any]) -> str:
    text = json.dumps(event, ensure_ascii=False)
    return AUDIO_B64.sub(lambda m: f'"audio": "{m.group(1)}…"', text)


def render(lines: list[Line]) -> str:
    """The transcript as text: one message a line, runs of binary frames folded."""
    out: list[str] = []
    run: list[int] = []  # sizes of the binary frames in a row

    def flush() -> None:
        if len(run) == 1:
            out.append(f"S→C <binary {run[0]} bytes>")
        elif run:
            out.append(f"S→C <binary × {len(run)}, {sum(run)} bytes>")
        run.clear()

    for side, item in lines:
        if isinstance(item, bytes):
            run.append(len(item))
            continue
        flush()
        if isinstance(item, tuple):
            verb = "close" if item[0] == "close" else "closes"
            out.append(f"{side} {verb} {item[1]}")
        else:
            out.append(f"{side} {_json(item)}")
    flush()
    return "\n".join(out)


def parse(text: str) -> list[Line]:
    """The lines of a rendered transcript back as (side, item); binary runs as bytes."""
    lines: list[Line] = []
    for raw in text.strip().splitlines():
        side, _, rest = raw.partition(" ")
        one = re.fullmatch(r"<binary (\d+) bytes>", rest)
        many = re.fullmatch(r"<binary × (\d+), (\d+) bytes>", rest)
        if one:
            lines.append((side, b"\0" * int(one[1])))
        elif many:
            lines += [(side, b"")] * int(many[1])
        elif rest.startswith(("close ", "closes ")):
            verb, code = rest.split()
            lines.append((side, ("close" if verb == "close" else "closed", int(code))))
        else:
            lines.append((side, json.loads(rest)))
    return lines


def keys(value: Any) -> Any:
    """The nested key structure of a JSON value (lists by their first element)."""
    if isinstance(value, dict):
        return {k: keys(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [keys(value[0])] if value else []
    return None


def kind(item: Any) -> str:
    """A short name of one message: its event/type, "bin", or "close"."""
    if isinstance(item, bytes):
        return "bin"
    if isinstance(item, tuple):
        return item[0]
    return str(item.get("event") or item.get("type") or "request")


# Events whose count depends on timing (audio length, decode progress) fold into one.
REPEATED = frozenset(("bin", "progress"))


# Transcription deltas come while audio streams or after the commit, as decoding goes: their
# keys are checked, their places are not.
UNORDERED = frozenset(
    ("conversation.item.input_audio_transcription.delta", "transcription.delta")
)


def shape(lines: list[Line]) -> tuple[list[tuple[str, str, Any]], list[Any]]:
    """What must not drift: (side, kind, keys) in order, timing-dependent runs folded,
    and the distinct shapes of the deltas.

    A run of binary frames and ``progress`` events becomes one entry per kind in the run;
    client appends fold the same way.
    """
    out: list[tuple[str, str, Any]] = []
    deltas: list[Any] = []
    run: set[tuple[str, str]] = set()
    for side, item in lines:
        name = kind(item)
        if name in UNORDERED:
            if keys(item) not in deltas:
                deltas.append(keys(item))
            continue
        entry = (side, name, keys(item) if isinstance(item, dict) else None)
        folds = name in REPEATED or name == "input_audio_buffer.append"
        if folds and (side, name) in run:
            continue
        if not folds:
            run = set()
        else:
            run.add((side, name))
        if name == "input_audio_buffer.append" or name == "bin":
            entry = (side, name, None)
        out.append(entry)
    return out, deltas


def block(doc: str, name: str) -> str:
    """The transcript ``name`` inside ``doc`` (between its markers, in a code fence)."""
    begin, end = BEGIN.format(name=name), END.format(name=name)
    start, stop = doc.index(begin) + len(begin), doc.index(end)
    body = doc[start:stop].strip()
    return body.removeprefix("```text").removesuffix("```").strip()


def replace_block(doc: str, name: str, transcript: str) -> str:
    """``doc`` with the transcript ``name`` replaced."""
    begin, end = BEGIN.format(name=name), END.format(name=name)
    start, stop = doc.index(begin) + len(begin), doc.index(end)
    return doc[:start] + "\n```text\n" + transcript + "\n```\n" + doc[stop:]


async def settle() -> None:
    """Let the consumers' disconnect handlers finish before the worker stops."""
    await asyncio.sleep(0.2)
