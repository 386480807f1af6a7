"""Client WebSockets of the tests that speak to real gateways: each read by a task of its own,
its events kept in order and its audio frames counted, with the requests they send."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import websockets

from tests.asr.conftest import b64, silence

TTS, REALTIME = "/v1/tts/ws", "/v1/realtime"
LONG_TEXT = "s" * 3000  # 30 s of fake audio at 0.1 s a chunk


def error_code(event: dict[str, Any]) -> str | None:
    """The code of a TTS (``event``) or realtime (``type``) error event, else None."""
    if event.get("event", event.get("type")) == "error":
        return str(event["error"]["code"])
    return None


class Socket:
    """One client WebSocket, read by a task of its own: events kept in order, frames counted."""

    def __init__(self, ws: Any, path: str, port: int) -> None:
        self.ws, self.path, self.port = ws, path, port
        self.events: list[dict[str, Any]] = []
        self.frames = 0
        self.close_code: int | None = None
        self.closed = False
        self._changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, port: int, path: str, raw: str) -> Socket:
        ws = await websockets.connect(
            f"ws://127.0.0.1:{port}{path}",
            additional_headers={"Authorization": f"Bearer {raw}"},
            open_timeout=10,
        )
        return cls(ws, path, port)

    def __repr__(self) -> str:
        return (
            f"<{self.path} on :{self.port}, {self.frames} frames, {self.events[-3:]}>"
        )

    async def _read(self) -> None:
        try:
            async for message in self.ws:
                if isinstance(message, bytes):
                    self.frames += 1
                else:
                    event = json.loads(message)
                    event["_at"] = time.monotonic()
                    self.events.append(event)
                self._changed.set()
        except websockets.ConnectionClosed:
            pass
        finally:
            self.close_code, self.closed = self.ws.close_code, True
            self._changed.set()

    async def wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        """Until ``done()``; fails after ``timeout`` s or at a close before it."""
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            assert left > 0 and not self.closed, f"{what}: {self!r} ({self.close_code})"
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                pass

    async def event(
        self, match: Callable[[dict[str, Any]], bool], timeout: float = 10
    ) -> dict[str, Any]:
        """The first event that ``match``es; an error event that does not fails."""
        found: list[dict[str, Any]] = []

        def done() -> bool:
            for event in self.events:
                if match(event):
                    found.append(event)
                    return True
                assert error_code(event) is None, f"unexpected error: {self!r}"
            return False

        await self.wait(done, timeout, "no such event")
        return found[0]

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(message))

    async def wait_closed(self, timeout: float = 5) -> int | None:
        await asyncio.wait_for(asyncio.shield(self._reader), timeout)
        return self.close_code

    async def close(self) -> None:
        await self.ws.close()
        await asyncio.wait_for(self._reader, 10)


def typed(kind: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("event", e.get("type")) == kind


def any_event(_: dict[str, Any]) -> bool:
    return True


async def admission(sock: Socket) -> str:
    """``admitted``, or the code of the connect-time denial (which closes with 1008)."""
    if sock.path == TTS:
        try:
            await sock.send({"event": "ping"})  # answered by an admitted stream only
        except websockets.ConnectionClosed:
            pass
    first = await sock.event(any_event, 10)
    if first.get("event") == "pong" or first.get("type") == "session.created":
        return "admitted"
    code = error_code(first)
    assert code is not None, first
    assert await sock.wait_closed() == 1008, sock
    return code


async def tts_stream(port: int, raw: str, text: str = LONG_TEXT) -> Socket:
    """A TTS request that has started sending audio."""
    sock = await Socket.open(port, TTS, raw)
    await sock.send({"text": text, "format": "pcm"})
    await sock.event(typed("header"))
    await sock.wait(lambda: sock.frames >= 2, 10, "no audio")
    return sock


async def tts_complete(port: int, raw: str) -> float:
    """One short TTS request to ``complete``; its duration."""
    started = time.monotonic()
    sock = await Socket.open(port, TTS, raw)
    await sock.send({"text": "Still here.", "format": "pcm"})
    await sock.event(typed("complete"))
    await sock.close()
    return time.monotonic() - started


async def realtime_item(port: int, raw: str, seconds: float = 1.5) -> Socket:
    """A realtime session with ``seconds`` of audio appended, not committed."""
    sock = await Socket.open(port, REALTIME, raw)
    await sock.event(typed("session.created"))
    append = {"type": "input_audio_buffer.append", "audio": b64(silence(seconds))}
    await sock.send(append)
    return sock


async def transcribe(sock: Socket, timeout: float = 10) -> str:
    """Commit the session's item; its completed transcript."""
    await sock.send({"type": "input_audio_buffer.commit"})
    done = await sock.event(
        typed("conversation.item.input_audio_transcription.completed"), timeout
    )
    return str(done["transcript"]).strip()


async def close_all(socks: list[Socket]) -> None:
    await asyncio.gather(*(s.close() for s in socks))
