"""``veena transcribe``: an audio file to text over ``/v1/realtime``.

The file is decoded to 16 kHz mono PCM16 and streamed in 100 ms appends, paced at ``speed``
times real time (0: as fast as the server keeps up). With client commits (the default) the CLI
cuts items at pauses, at most ``cuts.MAX_ITEM_S`` long, and commits each; items with no speech
are skipped. With ``server_vad`` the server cuts, from its ``speech_started``/``speech_stopped``;
after the last append the CLI commits what the server still holds and waits for the answer,
which the server sends only after the turn events of every append before it (it handles a
session's events in order), so no turn is lost however fast the upload ran. At most two
committed items wait for their transcript at any time, so a fast upload never piles audio
up on the server. Segment times come from the CLI's own timeline of the file.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from veena_cli.audio_in import AudioSource, Pcm
from veena_cli.connection import Server, lost, open_socket, receiving
from veena_cli.cuts import MAX_ITEM_S, choose_cut
from veena_cli.errors import EXIT_SERVER, CliError, ConnectionLost, realtime_error
from veena_cli.progress import ProgressBar

PATH = "/v1/realtime"
RATE = 16_000
CHUNK_S = 0.1
MAX_PENDING = 2  # committed items awaiting their transcript
SETUP_TIMEOUT_S = 15
FINISH_TIMEOUT_S = 120
MIN_COMMIT_S = 0.1  # realtime ASR_MIN_COMMIT_MS
VAD_SILENCE_MS = 500  # server_vad silence_duration_ms (realtime VD-3)
COMMIT_EMPTY = "input_audio_buffer_commit_empty"


@dataclass(frozen=True)
class TranscribeOptions:
    """Session settings and pacing."""

    speed: float = 0.0
    language: str | None = None
    prompt: str | None = None
    model: str | None = None
    server_vad: bool = False


@dataclass
class FileItem:
    """One committed item: where it lies in the file (samples at 16 kHz) and its text."""

    start: int
    end: int
    text: str = ""
    failed: bool = False
    done: bool = False

    def as_dict(self, index: int) -> dict[str, Any]:
        """The item as a JSON segment."""
        return {
            "id": index,
            "start": round(self.start / RATE, 3),
            "end": round(self.end / RATE, 3),
            "text": self.text.strip(),
        }


@dataclass
class Transcript:
    """The items with text, in order, and the audio's duration."""

    segments: list[FileItem] = field(default_factory=list)
    duration: float = 0.0
    failed_items: int = 0

    @property
    def text(self) -> str:
        """All segments' text joined by spaces."""
        return " ".join(s.text.strip() for s in self.segments if s.text.strip())


class Transcribe:
    """One session: sender (audio, commits), reader (events), and the items between them."""

    def __init__(
        self,
        server: Server,
        source: AudioSource,
        options: TranscribeOptions,
        *,
        progress: ProgressBar,
        on_segment: Callable[[FileItem], None] | None = None,
    ) -> None:
        self.server, self.source, self.options = server, source, options
        self.progress, self.on_segment = progress, on_segment
        self.items: list[FileItem] = []  # in commit order
        self.by_id: dict[str, FileItem] = {}
        self.uncommitted: list[FileItem] = []  # committed by us, not yet announced
        self.speech: FileItem | None = None  # server_vad: the item being spoken
        self.turn_end = 0  # server_vad: where the server's current item starts
        self.closing = False  # server_vad: the last commit is sent
        self.closed = False  # server_vad: ... and answered
        self.changed = asyncio.Event()
        self.sent = 0  # samples sent
        self.started = time.monotonic()
        self.finishing = False

    async def run(self) -> Transcript:
        """Connect, configure, stream the file, and collect every transcript."""
        async with open_socket(self.server, PATH, query="intent=transcription") as ws:
            await self.configure(ws)
            reader = asyncio.create_task(self.read(ws))
            try:
                await self.send_all(ws, reader)
                await self.until(reader, self.all_done, FINISH_TIMEOUT_S)
                self.draw(force=True)
            finally:
                self.finishing = True
                reader.cancel()
        done = [i for i in self.items if i.done and not i.failed and i.text.strip()]
        return Transcript(
            segments=done,
            duration=round(self.sent / RATE, 3),
            failed_items=sum(1 for i in self.items if i.failed),
        )

    async def configure(self, ws: ClientConnection) -> None:
        """Wait for ``session.created``, send ``session.update``, wait for ``session.updated``."""
        await self.expect(ws, "session.created")
        transcription: dict[str, Any] = {"language": self.options.language}
        if self.options.model:
            transcription["model"] = self.options.model
        if self.options.prompt:
            transcription["prompt"] = self.options.prompt
        turn = {"type": "server_vad"} if self.options.server_vad else None
        await ws.send(
            json.dumps(
                {
                    "type": "session.update",
                    "session": {
                        "type": "transcription",
                        "audio": {
                            "input": {
                                "format": {"type": "audio/pcm", "rate": RATE},
                                "transcription": transcription,
                                "turn_detection": turn,
                            }
                        },
                    },
                }
            )
        )
        await self.expect(ws, "session.updated")

    async def expect(self, ws: ClientConnection, kind: str) -> None:
        """Read until an event of ``kind``; an ``error`` or a close ends the run."""
        async with receiving(SETUP_TIMEOUT_S, f"no {kind} within {SETUP_TIMEOUT_S} s"):
            while True:
                event = json.loads(await ws.recv())
                if event.get("type") == "error":
                    raise realtime_error(event)
                if event.get("type") == kind:
                    return

    async def send_all(self, ws: ClientConnection, reader: asyncio.Task[None]) -> None:
        """Stream the file; commit each item (client cuts) or let the server cut (VAD)."""
        buffer = np.zeros(0, dtype=np.int16)
        blocks = self.source.blocks()
        lookahead = int(RATE * (MAX_ITEM_S + 1))
        ended = False
        while not ended or len(buffer):
            while not ended and len(buffer) < lookahead:
                block = next(blocks, None)
                if block is None:
                    ended = True
                else:
                    buffer = np.concatenate([buffer, block])
            if self.options.server_vad:
                size = len(buffer) if ended else len(buffer) - int(RATE)
                await self.until(reader, lambda: self.pending() < MAX_PENDING, None)
                await self.send_audio(ws, buffer[:size])
                buffer = buffer[size:]
                continue
            cut = choose_cut(buffer, RATE, final=ended)
            await self.send_item(ws, reader, buffer[: cut.length], cut)
            buffer = buffer[cut.length :]
        if self.options.server_vad:
            await self.end_turns(ws, reader)

    async def end_turns(self, ws: ClientConnection, reader: asyncio.Task[None]) -> None:
        """Server VAD: commit the rest and wait until the server has answered it."""
        self.closing = True
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        await self.until(reader, lambda: self.closed, FINISH_TIMEOUT_S)

    async def send_item(
        self, ws: ClientConnection, reader: asyncio.Task[None], pcm: Pcm, cut: Any
    ) -> None:
        """Send one item's audio and commit it, or skip it if it holds no speech."""
        if not cut.has_speech or len(pcm) < MIN_COMMIT_S * RATE:
            self.sent += len(pcm)
            self.draw()
            return
        start = self.sent
        await self.send_audio(ws, pcm)
        item = FileItem(start=start + cut.speech_start, end=start + cut.speech_end)
        self.uncommitted.append(item)
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        await self.until(reader, lambda: self.pending() < MAX_PENDING, None)

    async def send_audio(self, ws: ClientConnection, pcm: Pcm) -> None:
        """Appends of ``CHUNK_S`` (longer when unpaced), paced at ``speed``."""
        speed = self.options.speed
        chunk = int(RATE * CHUNK_S * (10 if speed <= 0 else max(1.0, speed)))
        for i in range(0, len(pcm), chunk):
            part = pcm[i : i + chunk]
            audio = base64.b64encode(part.astype("<i2").tobytes()).decode()
            await ws.send(
                json.dumps({"type": "input_audio_buffer.append", "audio": audio})
            )
            self.sent += len(part)
            self.draw()
            if speed > 0:
                due = self.started + self.sent / RATE / speed
                await asyncio.sleep(max(0.0, due - time.monotonic()))

    def pending(self) -> int:
        """Items committed whose transcript has not arrived."""
        return len(self.uncommitted) + sum(1 for i in self.items if not i.done)

    def all_done(self) -> bool:
        """Every committed item has its transcript (or failed)."""
        return self.pending() == 0

    async def until(
        self,
        reader: asyncio.Task[None],
        condition: Callable[[], bool],
        timeout: float | None,
    ) -> None:
        """Wait for ``condition`` (re-checked on every item change) while the reader runs."""
        try:
            async with asyncio.timeout(timeout):
                while not condition():
                    self.changed.clear()
                    waiter = asyncio.ensure_future(self.changed.wait())
                    await asyncio.wait({reader, waiter}, return_when="FIRST_COMPLETED")
                    waiter.cancel()
                    if reader.done():
                        reader.result()  # raises the reader's error
                        raise ConnectionLost(None, "the server closed the session")
        except TimeoutError:
            raise CliError(
                f"no transcript within {timeout:g} s of the last commit", EXIT_SERVER
            ) from None

    async def read(self, ws: ClientConnection) -> None:
        """Apply every server event to the items until the connection closes."""
        try:
            async for message in ws:
                self.apply(json.loads(message))
                self.changed.set()
        except ConnectionClosed as exc:
            if not self.finishing:
                raise lost(exc) from None
        if not self.finishing:
            raise ConnectionLost(ws.close_code, ws.close_reason or "")

    def apply(self, event: dict[str, Any]) -> None:
        """One server event (OpenAI GA or beta shapes)."""
        kind = event.get("type")
        if kind == "error":
            if self.closing and not self.closed and _code(event) == COMMIT_EMPTY:
                self.closed = True  # the server's turns had taken all the audio
                return
            raise realtime_error(event)
        if kind == "input_audio_buffer.speech_started":
            start = int(event.get("audio_start_ms", 0)) * RATE // 1000
            self.speech = FileItem(start=start, end=start)
        elif kind == "input_audio_buffer.speech_stopped" and self.speech is not None:
            self.turn_end = int(event.get("audio_end_ms", 0)) * RATE // 1000
            end = self.turn_end - (VAD_SILENCE_MS - 100) * RATE // 1000
            self.speech.end = max(self.speech.start, end)
            self.uncommitted.append(self.speech)
            self.speech = None
        elif kind == "input_audio_buffer.committed":
            self.committed(str(event.get("item_id")))
        elif kind == "conversation.item.input_audio_transcription.completed":
            self.finish(event, str(event.get("transcript") or ""), failed=False)
        elif kind == "conversation.item.input_audio_transcription.failed":
            self.finish(event, "", failed=True)

    def committed(self, item_id: str) -> None:
        """A commit's answer: a server VAD turn, one of ours, or the last commit."""
        if self.uncommitted:
            item = self.uncommitted.pop(0)
        elif self.closing and not self.closed:
            item = self.speech or FileItem(start=self.turn_end, end=self.sent)
            item.end, self.speech, self.closed = self.sent, None, True
        else:
            return
        self.items.append(item)
        self.by_id[item_id] = item

    def finish(self, event: dict[str, Any], text: str, *, failed: bool) -> None:
        """An item's transcript (or failure) arrived."""
        item = self.by_id.get(str(event.get("item_id")))
        if item is None or item.done:
            return
        item.text, item.failed, item.done = text, failed, True
        if failed:
            self.progress.note(
                f"veena: warning: the server failed to transcribe "
                f"{item.start / RATE:.1f}–{item.end / RATE:.1f} s"
            )
        elif text.strip() and self.on_segment is not None:
            self.on_segment(item)

    def draw(self, *, force: bool = False) -> None:
        """Seconds sent of the total, items done, and the upload speed."""
        sent = self.sent / RATE
        total = self.source.seconds
        elapsed = max(1e-3, time.monotonic() - self.started)
        done = sum(1 for i in self.items if i.done)
        of = f"/{total:,.1f}" if total else ""
        self.progress.update(
            sent / total if total else None,
            f"{sent:,.1f}{of} s sent  {done} items  ×{sent / elapsed:.1f}",
            force=force,
        )


def _code(event: dict[str, Any]) -> str:
    """The code of an ``error`` event (OpenAI's envelope)."""
    error = event.get("error")
    return str(error.get("code") or "") if isinstance(error, dict) else ""
