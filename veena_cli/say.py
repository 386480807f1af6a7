"""``veena say``: text to an audio file over ``/v1/tts/ws``, resumable by segment.

The text is cut into segments (``veena_cli.segments``); each is one request on a keep-alive
stream (tts-ws §9.1), asking for raw ``pcm`` (or ``mulaw``) so the file gets one header of our
own. A segment counts only once its ``complete`` arrives with every byte it announces; it is
then made durable and recorded in ``<out>.part.json``. When the connection drops or the server
fails in a way that may pass, the partial audio of the unfinished segment is discarded and a
new connection resumes at the first incomplete segment. The same command run again after the
CLI itself stopped resumes from the recorded state, if the text and options are unchanged.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from veena_cli.audiofile import BYTES_PER_SAMPLE, AudioFile, Container
from veena_cli.connection import Server, open_socket, receiving
from veena_cli.errors import (
    EXIT_FAILURE,
    EXIT_INPUT,
    TTS_WARNINGS,
    CliError,
    ConnectionLost,
    ServerError,
    tts_error,
)
from veena_cli.progress import ProgressBar
from veena_cli.segments import TextSpan, split_text

PATH = "/v1/tts/ws"
STATE_VERSION = 1
SILENCE_LIMIT_S = 60  # no message at all for this long: the connection is dead


@dataclass(frozen=True)
class SayOptions:
    """What the requests ask for; part of the resume key."""

    container: Container = "wav"
    speaker: str | None = None
    sample_rate: int | None = None
    speed: float | None = None
    segment_chars: int = 1000

    def request_fields(self) -> dict[str, Any]:
        """The request fields every segment carries (tts-ws §2.1)."""
        fields: dict[str, Any] = {
            "format": "mulaw" if self.container == "mulaw" else "pcm",
            "keep_alive": True,
            "timestamps": True,
        }
        for name in ("speaker", "sample_rate", "speed"):
            if getattr(self, name) is not None:
                fields[name] = getattr(self, name)
        return fields


@dataclass
class SegmentDone:
    """A completed segment as recorded: where it is in the text and in the file."""

    index: int
    char_start: int
    char_end: int
    request_id: str
    bytes: int
    audio_seconds: float  # complete.metrics.audio_duration_seconds
    attempts: int


@dataclass
class State:
    """The resume record kept beside the partial file."""

    key: str
    sample_rate: int | None = None
    done: list[SegmentDone] = field(default_factory=list)

    @property
    def data_bytes(self) -> int:
        """Audio bytes of the completed segments."""
        return sum(seg.bytes for seg in self.done)

    def save(self, path: Path) -> None:
        """Write atomically (a crash leaves the old or the new record)."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"version": STATE_VERSION, **asdict(self)}))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path, key: str, part: Path, offset: int) -> State | None:
        """The recorded state if it belongs to this text and options and its file is intact."""
        try:
            raw = json.loads(path.read_text())
            if raw.get("version") != STATE_VERSION or raw.get("key") != key:
                return None
            state = cls(
                key=key,
                sample_rate=raw["sample_rate"],
                done=[SegmentDone(**seg) for seg in raw["done"]],
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not part.exists() or part.stat().st_size < offset + state.data_bytes:
            return None
        return state


@dataclass
class SayReport:
    """What ``veena say`` did (printed as JSON with ``--json``)."""

    output: str
    format: str
    sample_rate: int
    characters: int
    audio_seconds: float
    segments: list[SegmentDone]
    reconnects: int
    resumed_at: int
    elapsed_seconds: float


class Say:
    """One ``veena say`` run: segments, the partial file, the state, the progress bar."""

    def __init__(
        self,
        server: Server,
        text: str,
        out: Path,
        options: SayOptions,
        *,
        retries: int,
        progress: ProgressBar,
    ) -> None:
        self.server, self.text, self.out, self.options = server, text, out, options
        self.retries, self.progress = retries, progress
        self.segments = split_text(text, options.segment_chars)
        if not self.segments:
            raise CliError(
                "nothing to say: the text has no letters or digits", EXIT_INPUT
            )
        if not out.parent.is_dir():
            raise CliError(f"no such directory: {out.parent}", EXIT_INPUT)
        self.part = out.with_name(out.name + ".part")
        self.state_path = out.with_name(out.name + ".part.json")
        digest = hashlib.sha256(text.encode()).hexdigest()
        self.key = json.dumps([digest, asdict(options)], sort_keys=True)
        self.run_id = secrets.token_hex(4)
        self.file: AudioFile | None = None
        self.reconnects = 0
        self.connected = False  # whether any connection of this run opened
        self.attempts: dict[int, int] = {}  # requests sent per segment index
        self.chars_done = 0  # characters of the current segment already spoken

    def prepare(self) -> int:
        """Load a matching resume state (or start fresh); return the first segment to do."""
        offset = 44 if self.options.container == "wav" else 0
        state = State.load(self.state_path, self.key, self.part, offset)
        self.state = state or State(key=self.key, sample_rate=self.options.sample_rate)
        if state and state.sample_rate:
            self.file = AudioFile(self.part, self.options.container, state.sample_rate)
            self.file.open(resume_bytes=state.data_bytes)
        return len(self.state.done)

    async def run(self) -> SayReport:
        """Speak every remaining segment, reconnecting as needed; finish the file."""
        started = time.monotonic()
        resumed_at = self.prepare()
        try:
            await self.speak_all()
        finally:
            if self.file is not None and len(self.state.done) < len(self.segments):
                self.file.close()  # the .part file and its record stay, to resume
        assert self.file is not None
        self.file.finish()
        os.replace(self.part, self.out)
        self.state_path.unlink(missing_ok=True)
        return self.report(resumed_at, time.monotonic() - started)

    async def speak_all(self) -> None:
        """Every remaining segment in order, on as many connections as it takes."""
        failures = 0
        while len(self.state.done) < len(self.segments):
            before = len(self.state.done)
            try:
                async with open_socket(self.server, PATH) as ws:
                    self.connected = True
                    while len(self.state.done) < len(self.segments):
                        seg = self.segments[len(self.state.done)]
                        await self.speak(ws, seg)
            except CliError as error:
                exc = error
            else:
                return
            self.discard_partial()
            if not self.may_retry(exc):
                raise exc
            failures = 0 if len(self.state.done) > before else failures + 1
            if failures > self.retries:
                raise CliError(
                    f"{exc.line}; gave up after {failures} attempts", exc.exit_code
                )
            await self.wait_before_retry(exc, failures)

    def may_retry(self, exc: CliError) -> bool:
        """Dropped connections and passing server conditions; never auth, input or quota.

        A server that could not be reached at all in this run is not waited for.
        """
        return exc.retry and self.connected

    async def wait_before_retry(self, exc: CliError, failures: int) -> None:
        """Back off (the server's ``retry_after_ms`` when it gave one), then reconnect."""
        delay = min(8.0, 0.5 * 2 ** max(0, failures - 1))
        if isinstance(exc, ServerError) and exc.retry_after_ms:
            delay = max(delay, exc.retry_after_ms / 1000)
        at = len(self.state.done)
        self.progress.note(
            f"veena: {exc.line}; resuming at segment {at + 1}/{len(self.segments)} "
            f"in {delay:.1f} s"
        )
        self.reconnects += 1
        await asyncio.sleep(delay)

    def discard_partial(self) -> None:
        """Drop the audio of the unfinished segment (it is spoken again in full)."""
        if self.file is not None:
            self.file.rollback()
        self.chars_done = 0

    async def speak(self, ws: ClientConnection, seg: TextSpan) -> None:
        """One segment as one request; record it once its ``complete`` checks out."""
        self.attempts[seg.index] = self.attempts.get(seg.index, 0) + 1
        request_id = f"{self.run_id}-{seg.index}-{self.attempts[seg.index]}"
        request: dict[str, Any] = {"text": seg.text, "request_id": request_id}
        request.update(self.options.request_fields())
        if self.state.sample_rate:
            request["sample_rate"] = self.state.sample_rate
        try:
            await ws.send(json.dumps(request, ensure_ascii=False))
        except ConnectionClosed:
            pass  # the server closed first: its error event, if any, is read below
        received, spans = 0, {}
        while True:
            message = await self.receive(ws)
            if isinstance(message, bytes):
                assert self.file is not None, "audio before header"
                self.file.write(message)
                received += len(message)
                self.draw(seg)
                continue
            event = json.loads(message)
            kind = event.get("event")
            if kind == "header":
                self.on_header(event)
            elif kind == "segment_start":
                spans[event.get("seq")] = event.get("char_end", 0)
            elif kind == "segment_end":
                self.chars_done = int(spans.get(event.get("seq"), 0))
            elif kind == "warning":
                code = str(event.get("code"))
                self.progress.note(f"veena: warning: {TTS_WARNINGS.get(code, code)}")
            elif kind == "error":
                raise tts_error(event.get("error"))
            elif kind == "complete":
                self.on_complete(seg, request_id, event.get("metrics", {}), received)
                return

    async def receive(self, ws: ClientConnection) -> str | bytes:
        """The next message; a close or a silent connection is ConnectionLost."""
        async with receiving(
            SILENCE_LIMIT_S, f"nothing received for {SILENCE_LIMIT_S} s"
        ):
            return await ws.recv()

    def on_header(self, event: dict[str, Any]) -> None:
        """The first header fixes the file's sample rate; later ones must agree."""
        rate = int(event.get("sample_rate") or 0)
        if self.file is None:
            self.state.sample_rate = rate
            self.file = AudioFile(self.part, self.options.container, rate)
            self.file.open()
        elif rate != self.file.sample_rate:
            raise CliError(
                f"the server changed the sample rate ({self.file.sample_rate} → {rate})",
                EXIT_FAILURE,
            )

    def on_complete(
        self,
        seg: TextSpan,
        request_id: str,
        metrics: dict[str, Any],
        received: int,
    ) -> None:
        """Check the segment's audio against its metrics, then make it durable."""
        if metrics.get("cancelled"):
            raise ConnectionLost(None, "the server cancelled the request")
        if metrics.get("total_bytes") != received:
            raise ConnectionLost(
                None, f"received {received} of {metrics.get('total_bytes')} bytes"
            )
        assert self.file is not None
        self.file.commit()
        self.state.done.append(
            SegmentDone(
                index=seg.index,
                char_start=seg.start,
                char_end=seg.end,
                request_id=request_id,
                bytes=received,
                audio_seconds=float(metrics.get("audio_duration_seconds", 0.0)),
                attempts=self.attempts[seg.index],
            )
        )
        self.state.save(self.state_path)
        self.chars_done = 0
        self.draw(seg, force=True)

    def draw(self, seg: TextSpan, *, force: bool = False) -> None:
        """Characters done (whole segments plus spoken sentences) and audio seconds."""
        done = self.state.done
        chars = (done[-1].char_end if done else 0) + self.chars_done
        total = len(self.text)
        audio = self.file.seconds if self.file else 0.0
        self.progress.update(
            chars / total,
            f"{chars:,}/{total:,} chars  {audio:,.1f} s audio  "
            f"segment {min(len(done) + 1, len(self.segments))}/{len(self.segments)}",
            force=force,
        )

    def report(self, resumed_at: int, elapsed: float) -> SayReport:
        """The run's summary."""
        assert self.file is not None
        per_sample = BYTES_PER_SAMPLE[self.options.container]
        return SayReport(
            output=str(self.out),
            format=self.options.container,
            sample_rate=self.file.sample_rate,
            characters=len(self.text),
            audio_seconds=round(
                self.state.data_bytes / per_sample / self.file.sample_rate, 3
            ),
            segments=self.state.done,
            reconnects=self.reconnects,
            resumed_at=resumed_at,
            elapsed_seconds=round(elapsed, 2),
        )
