"""One session of each kind, start to end, as a client sees it: for the fault tests.

Each returns an ``Outcome``: ``told`` is ``ok`` when the whole result came (its content kept,
to compare with a reference), else what the client was told: ``<code>/<close code>`` for a
socket (``no error/<close>`` for a close without an error event), ``HTTP <status> <code>``
for REST, ``refused`` when the connection was not accepted, ``dropped`` when it broke
without a close frame, and ``cut`` when a 200's body was aborted (a failure after headers).
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import time
from dataclasses import dataclass, field
from typing import Any

import websockets

TIMEOUT_S = 30.0
SILENCE_24K = bytes(48_000)  # one second of realtime input (24 kHz PCM16)


@dataclass
class Outcome:
    kind: str  # "tts", "realtime" or "speech"
    port: int
    started: float
    ended: float = 0.0
    told: str = "dropped"
    message: str = ""  # the error's message, if any
    content: bytes | str = field(default=b"", repr=False)

    @property
    def ok(self) -> bool:
        return self.told == "ok"


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def tts_session(port: int, key: str, text: str) -> Outcome:
    """One request on ``/v1/tts/ws`` (PCM): ok with its audio once ``complete`` came."""
    out = Outcome("tts", port, time.monotonic())
    audio = bytearray()
    async with _socket(out, port, "/v1/tts/ws", key) as ws:
        if ws is not None:
            await _send(ws, {"text": text, "format": "pcm"})
            while (message := await _next(ws, out)) is not None:
                if isinstance(message, bytes):
                    audio += message
                elif message["event"] == "complete":
                    out.told, out.content = "ok", bytes(audio)
                    break
    out.ended = time.monotonic()
    return out


async def realtime_session(port: int, key: str, seconds: int = 2) -> Outcome:
    """One item on ``/v1/realtime``: ok with its transcript once it is completed."""
    out = Outcome("realtime", port, time.monotonic())
    async with _socket(out, port, "/v1/realtime", key) as ws:
        message = await _next(ws, out) if ws is not None else None
        if ws is not None and message is not None:
            audio = base64.b64encode(SILENCE_24K * seconds).decode()
            await _send(ws, {"type": "input_audio_buffer.append", "audio": audio})
            await _send(ws, {"type": "input_audio_buffer.commit"})
            done = "conversation.item.input_audio_transcription.completed"
            while (message := await _next(ws, out)) is not None:
                if message.get("type") == done:
                    out.told, out.content = "ok", str(message["transcript"])
                    break
    out.ended = time.monotonic()
    return out


async def speech_request(port: int, key: str, text: str) -> Outcome:
    """``POST /v1/audio/speech`` (PCM): ok with its body on 200."""
    out = Outcome("speech", port, time.monotonic())
    status, body = await asyncio.to_thread(_post_speech, port, key, text)
    if status == 200:
        out.told, out.content = "ok", body
    elif status:
        error = json.loads(body or b"null") or {}
        code = (error.get("error") or {}).get("code")
        out.told, out.message = f"HTTP {status} {code}", str(error)[:200]
    else:
        out.told = body.decode()
    out.ended = time.monotonic()
    return out


def _post_speech(port: int, key: str, text: str) -> tuple[int, bytes]:
    body = {"model": "tts-1", "input": text, "voice": "alloy", "response_format": "pcm"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    try:
        conn.request(
            "POST",
            "/v1/audio/speech",
            json.dumps(body),
            {**auth(key), "Content-Type": "application/json"},
        )
        response = conn.getresponse()
    except ConnectionRefusedError:
        return 0, b"refused"
    except (OSError, http.client.HTTPException):
        return 0, b"dropped"
    try:
        return response.status, response.read()
    except (OSError, http.client.HTTPException):
        return 0, b"cut"  # the body aborted after the headers: a failure mid-stream
    finally:
        conn.close()


class _socket:
    """``websockets.connect`` that records a refusal or a break in the outcome instead of
    raising; yields None when no socket opened."""

    def __init__(self, out: Outcome, port: int, path: str, key: str) -> None:
        self.out, self.url, self.key = out, f"ws://127.0.0.1:{port}{path}", key
        self.ws: Any = None

    async def __aenter__(self) -> Any:
        try:
            self.ws = await websockets.connect(
                self.url, additional_headers=auth(self.key), open_timeout=10
            )
        except ConnectionRefusedError:
            self.out.told = "refused"
        except websockets.InvalidStatus as error:
            self.out.told = f"HTTP {error.response.status_code}"
        except (OSError, websockets.WebSocketException, TimeoutError):
            self.out.told = "dropped"
        return self.ws

    async def __aexit__(self, *exc: object) -> bool:
        if isinstance(exc[1], websockets.ConnectionClosed):
            _closed_without_error(self.out, exc[1])
        if self.ws is not None:
            await self.ws.close()
        return isinstance(exc[1], (OSError, websockets.WebSocketException))


def _closed_without_error(out: Outcome, closed: websockets.ConnectionClosed) -> None:
    """A close before any error event or result: ``no error/<code>``, or ``dropped``."""
    if out.told == "dropped" and closed.rcvd is not None:
        out.told = f"no error/{closed.rcvd.code}"


async def _send(ws: Any, event: dict[str, Any]) -> None:
    """Send, unless the server has closed: what it said first is still to be read."""
    try:
        await ws.send(json.dumps(event))
    except websockets.ConnectionClosed:
        pass


async def _next(ws: Any, out: Outcome) -> Any:
    """The next message (bytes, or a parsed event); None at an error event or the close,
    which are recorded in ``out``."""
    try:
        message = await asyncio.wait_for(ws.recv(), TIMEOUT_S)
    except websockets.ConnectionClosed as closed:
        _closed_without_error(out, closed)
        return None
    except TimeoutError:
        out.told = "no answer"
        return None
    if isinstance(message, bytes):
        return message
    event = json.loads(message)
    if event.get("event", event.get("type")) == "error":
        error = event.get("error", event)
        out.told, out.message = f"{error.get('code')}/?", str(error.get("message"))
        await _closed(ws, out)
        return None
    return event


async def _closed(ws: Any, out: Outcome) -> None:
    """After an error event: wait for the server's close and record its code."""
    try:
        while True:
            await asyncio.wait_for(ws.recv(), 10)
    except websockets.ConnectionClosed as closed:
        code = closed.rcvd.code if closed.rcvd is not None else "none"
        out.told = out.told[:-1] + str(code)
    except TimeoutError:
        out.told = out.told[:-1] + "not closed"
