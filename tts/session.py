"""State of one TTS stream and its current request: pure dataclasses and enums (STYLE 6).

A stream carries requests one at a time (K2). Each request has its own id, counters, progress
cadence and epoch (C2); the stream keeps the ids it has used (K3) and the keep-alive flag of its
latest request (K1). Times come from an injectable clock so tests need no sleeps.
"""

from __future__ import annotations

import enum
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.link.states import Transitions
from tts.events import Header, Progress, SegmentEnd, SegmentStart
from tts.messages import DEFAULT_CHUNK_WINDOW, ChunkOrder
from tts.outputs import TtsFail
from tts.protocol import CLOSE_CODES, NON_FATAL_CODES, TtsProtocolError, TtsRequest
from tts.text import SEGMENT_MAX_CHARS, SEGMENT_MIN_CHARS, TextBuffer

Clock = Callable[[], float]


class StreamState(enum.Enum):
    """Lifecycle of a stream; CLOSED is terminal (``STREAM_STATES``)."""

    OPEN = enum.auto()  # admitted; a request may be active
    CLOSED = enum.auto()


STREAM_STATES = Transitions(
    {StreamState.OPEN: {StreamState.CLOSED}, StreamState.CLOSED: ()}
)


class RequestState(enum.Enum):
    """Lifecycle of one request; transitions only move forward (``REQUEST_STATES``)."""

    SUBMITTING = enum.auto()  # sent to a worker, no header yet
    STREAMING = enum.auto()  # header sent, audio flowing
    DONE = enum.auto()  # complete or error sent


REQUEST_STATES = Transitions(
    {
        RequestState.SUBMITTING: {RequestState.STREAMING, RequestState.DONE},
        RequestState.STREAMING: {RequestState.DONE},
        RequestState.DONE: (),
    }
)


@dataclass
class SegmentSpan:
    """Where a segment sits in the request text (T7)."""

    char_start: int
    char_end: int


@dataclass
class ActiveRequest:
    """Counters and identity of the stream's current request (E1–E3, §9)."""

    request: TtsRequest
    request_id: str
    voice: str
    t0: float
    clock: Clock = field(repr=False)
    chunks: ChunkOrder
    engine: str = ""  # the engine's wire name (header, complete) when it started
    state: RequestState = RequestState.SUBMITTING
    header_at: float | None = None
    first_audio_at: float | None = None
    chunks_sent: int = 0
    bytes_sent: int = 0
    samples_sent: int = 0
    epoch: int = 0
    last_segment_seq: int | None = None
    open_segment: int | None = (
        None  # timestamps: segment_start sent, segment_end not yet
    )
    spans: dict[int, SegmentSpan] = field(default_factory=dict, repr=False)
    outstanding: set[int] = field(default_factory=set, repr=False)  # no segment_end yet
    last_audio_at: float = 0.0
    buffer: TextBuffer | None = field(default=None, repr=False)  # incremental only
    text_chars: int = 0
    ended: bool = False  # incremental: ``end`` received
    flushes: int = 0
    frames_dropped: int = 0
    truncated: bool = False
    ack_pending: int | None = None  # Q8: the chunk seq to acknowledge once sent
    ack_held_since: float | None = None  # the transport was full at that time
    # Token engines (AU7): SNAC frames decoded, ids generated, ids outside the audio range.
    snac_frames: int = 0
    tokens: int = 0
    tokens_ignored: int = 0

    @property
    def source_text(self) -> str:
        """The text that segment offsets point into (T7)."""
        return self.buffer.text if self.buffer is not None else self.request.text

    @property
    def audio_ms(self) -> int:
        """Audio sent so far, in integer ms (samples ÷ rate)."""
        return self.samples_sent * 1000 // self.request.sample_rate

    def elapsed_ms(self) -> int:
        """Integer ms since t0."""
        return int((self.clock() - self.t0) * 1000)

    def add_segments(self, spans: list[tuple[int, int, int]]) -> None:
        """Remember ``(seq, char_start, char_end)`` of segments sent to the worker."""
        for seq, start, end in spans:
            self.spans[seq] = SegmentSpan(start, end)
            self.outstanding.add(seq)
        self.last_audio_at = self.clock()

    def audio_pending(self, stale_s: float) -> bool:
        """I6: segments still owe audio, and the worker produced some within ``stale_s``."""
        return bool(self.outstanding) and self.clock() - self.last_audio_at < stale_s

    def chunk_received(self, segment_seq: int, segment_end: bool) -> None:
        """Note worker progress on a segment."""
        self.last_audio_at = self.clock()
        if segment_end:
            self.outstanding.discard(segment_seq)

    def next_flush_id(self, given: str | int | None) -> str | int:
        """I4: the client's flush id, else 1, 2, … per request."""
        self.flushes += 1
        return given if given is not None else self.flushes

    def count_frame(self, nbytes: int, samples: int, progress_every: int) -> bool:
        """Count one binary frame; True when a progress event is due now (E2)."""
        self.chunks_sent += 1
        self.bytes_sent += nbytes
        self.samples_sent += samples
        if samples and self.first_audio_at is None:
            self.first_audio_at = self.clock()
        return self.chunks_sent % progress_every == 0

    def header_event(self, model_version: str, engine: str) -> Header:
        """E1, for the request's format and resolved voice."""
        req = self.request
        return Header(
            request_id=self.request_id,
            sample_rate=req.sample_rate,
            format=req.format,
            model_version=model_version,
            speaker=self.voice,
            engine=engine,
            encoding="mulaw" if req.format == "mulaw" else "pcm_s16le",
        )

    def progress_event(self) -> Progress:
        """The progress event for the counters now (E2)."""
        stamps = self.request.timestamps
        return Progress(
            chunks_sent=self.chunks_sent,
            bytes_sent=self.bytes_sent,
            elapsed_ms=self.elapsed_ms(),
            request_id=self.request_id,
            audio_ms=self.audio_ms,
            segment_seq=self.last_segment_seq if stamps else None,
        )

    def segment_start_event(self, seq: int) -> SegmentStart:
        """TS1: sent immediately before a segment's first frame."""
        span = self.spans.get(seq, SegmentSpan(0, 0))
        self.open_segment = seq
        return SegmentStart(
            request_id=self.request_id,
            seq=seq,
            text=self.source_text[span.char_start : span.char_end],
            char_start=span.char_start,
            char_end=span.char_end,
            start_ms=self.audio_ms,
        )

    def segment_end_event(self, seq: int) -> SegmentEnd:
        """TS1: sent immediately after a segment's last frame."""
        self.open_segment = None
        return SegmentEnd(request_id=self.request_id, seq=seq, end_ms=self.audio_ms)

    def complete_metrics(self, *, cancelled: bool, engine: str) -> dict[str, Any]:
        """The complete event's metrics (E3): legacy names first, then the additive ones."""
        total = self.clock() - self.t0
        audio = self.samples_sent / self.request.sample_rate
        ttfb = int((self.first_audio_at - self.t0) * 1000) if self.first_audio_at else 0
        queue_wait = int((self.header_at - self.t0) * 1000) if self.header_at else 0
        return {
            "request_id": self.request_id,
            "chunks_sent": self.chunks_sent,
            "total_bytes": self.bytes_sent,
            "audio_duration_seconds": round(audio, 2),
            "total_time_seconds": round(total, 2),
            "ttfb_ms": ttfb,
            "rtf": round(total / audio, 3) if audio > 0 else 0,
            "cancelled": cancelled,
            "queue_wait_ms": queue_wait,
            "text_chars": self.text_chars,
            "segments": len(self.spans),
            "sample_rate": self.request.sample_rate,
            "format": self.request.format,
            "speaker": self.voice,
            "engine": engine,
            "frames_dropped": self.frames_dropped,
            "truncated": self.truncated,
            "snac_frames": self.snac_frames,
            "tokens": self.tokens,
            "tokens_ignored": self.tokens_ignored,
        }

    def usage_timing(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """E5: the usage record's ``ttfb_ms`` and ``rtf`` are the ``complete`` values; with no
        audio sent there is no first frame and no ratio, so both are null (not E3's 0)."""
        if not self.samples_sent:
            return {"ttfb_ms": None, "rtf": None}
        return {"ttfb_ms": metrics["ttfb_ms"], "rtf": metrics["rtf"]}


@dataclass
class TtsSession:
    """One stream: its id at accept (X1), keep-alive flag, used ids and current request."""

    stream_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    clock: Clock = field(default=time.monotonic, repr=False)
    state: StreamState = StreamState.OPEN
    keep_alive: bool = False
    requests_started: int = 0
    used_ids: set[str] = field(default_factory=set, repr=False)
    active: ActiveRequest | None = None

    @property
    def closed(self) -> bool:
        """True once the stream has ended."""
        return self.state is StreamState.CLOSED

    @property
    def busy(self) -> bool:
        """True while a request is active (from receipt to its terminal event)."""
        return self.active is not None and self.active.state is not RequestState.DONE

    @property
    def incremental(self) -> bool:
        """True while an incremental request (§9.2) is active."""
        return self.busy and self.active is not None and self.active.request.incremental

    def current_request_id(self) -> str:
        """The id an error names: the active request's, else the next request's (X1)."""
        if self.busy and self.active is not None:
            return self.active.request_id
        return self.request_id_for()

    def error_effect(self, error: TtsFail) -> tuple[bool, int | None]:
        """§6/K1: whether ``error`` is fatal, and the stream's close code then."""
        keep = self.keep_alive if error.keep_alive is None else error.keep_alive
        fatal = error.fatal
        if fatal is None:
            fatal = not (keep and error.code in NON_FATAL_CODES)
        return fatal, (error.close_code or CLOSE_CODES[error.code]) if fatal else None

    def closing_code(self, *, draining: bool) -> int | None:
        """W9/K1/W12: the close after ``complete``; None keeps a keep-alive stream open."""
        if not self.keep_alive:
            return 1000
        return 1001 if draining else None

    def request_id_for(self, given: str | None = None) -> str:
        """X1/K3: the client's id (``given``), else the accept-time UUID for the first
        request, else a new one."""
        if given is not None:
            return given
        if self.requests_started == 0:
            return self.stream_request_id
        return str(uuid.uuid4())

    def begin(
        self,
        req: TtsRequest,
        *,
        request_id: str,
        voice: str,
        engine: str = "",
        segment_chars: tuple[int, int] = (SEGMENT_MIN_CHARS, SEGMENT_MAX_CHARS),
        chunk_window: int = DEFAULT_CHUNK_WINDOW,
    ) -> ActiveRequest:
        """Start a request (t0 = now, U3); raise TtsProtocolError for K2 or K3."""
        if self.busy:
            raise TtsProtocolError("VALIDATION_ERROR", "A request is already active")
        if request_id in self.used_ids:
            raise TtsProtocolError(
                "VALIDATION_ERROR", "request_id already used on this stream"
            )
        self.used_ids.add(request_id)
        self.requests_started += 1
        self.keep_alive = req.keep_alive
        self.active = ActiveRequest(
            request=req,
            request_id=request_id,
            voice=voice,
            engine=engine,
            t0=self.clock(),
            clock=self.clock,
            chunks=ChunkOrder(window=chunk_window),
            buffer=TextBuffer(*segment_chars) if req.incremental else None,
        )
        return self.active

    def end_request(self) -> None:
        """The active request reached its terminal event."""
        if self.active is not None and self.active.state is not RequestState.DONE:
            self.active.state = REQUEST_STATES.move(
                self.active.state, RequestState.DONE
            )
