"""State of one TTS stream: pure dataclasses and enums, no I/O (STYLE 6)."""

from __future__ import annotations

import asyncio
import enum
import time
from dataclasses import dataclass, field
from typing import Any

from tts.protocol import TtsRequest

WAV_HEADER_BYTES = 44


class TtsState(enum.Enum):
    """Lifecycle of a stream; CLOSED is terminal."""

    IDLE = enum.auto()  # admitted, waiting for a request
    SUBMITTING = enum.auto()  # request sent to the worker, no header yet
    STREAMING = enum.auto()  # header sent, audio flowing
    CLOSED = enum.auto()


@dataclass
class TtsSession:
    """Counters and identity of the stream's (single) request."""

    stream_request_id: str
    state: TtsState = TtsState.IDLE
    request: TtsRequest | None = None
    request_id: str = ""
    voice: str = ""
    t0: float = 0.0
    first_audio_at: float | None = None
    header_at: float | None = None
    chunks_sent: int = 0
    bytes_sent: int = 0
    samples_sent: int = 0
    next_chunk_seq: int = 0
    timeout_task: asyncio.Task[None] | None = field(default=None, repr=False)

    def begin(self, req: TtsRequest) -> None:
        """Start a request: t0 is its receipt (tts U3)."""
        assert self.state is TtsState.IDLE
        self.state = TtsState.SUBMITTING
        self.request = req
        self.request_id = req.request_id or self.stream_request_id
        self.t0 = time.monotonic()

    def count_frame(self, nbytes: int, samples: int) -> None:
        """Count one binary frame sent to the client."""
        self.chunks_sent += 1
        self.bytes_sent += nbytes
        self.samples_sent += samples

    @property
    def audio_seconds(self) -> float:
        """Audio sent so far, from samples actually sent."""
        if self.request is None:
            return 0.0
        return self.samples_sent / self.request.sample_rate

    def progress_event(self) -> dict[str, Any]:
        """The progress event for the counters now (tts E2)."""
        return {
            "event": "progress",
            "chunks_sent": self.chunks_sent,
            "bytes_sent": self.bytes_sent,
            "elapsed_ms": int((time.monotonic() - self.t0) * 1000),
            "request_id": self.request_id,
            "audio_ms": int(self.audio_seconds * 1000),
        }

    def complete_metrics(self, *, cancelled: bool, engine: str) -> dict[str, Any]:
        """The complete event's metrics (tts E3), legacy names first."""
        total = time.monotonic() - self.t0
        audio = self.audio_seconds
        ttfb = int((self.first_audio_at - self.t0) * 1000) if self.first_audio_at else 0
        req = self.request
        return {
            "request_id": self.request_id,
            "chunks_sent": self.chunks_sent,
            "total_bytes": self.bytes_sent,
            "audio_duration_seconds": round(audio, 2),
            "total_time_seconds": round(total, 2),
            "ttfb_ms": ttfb,
            "rtf": round(total / audio, 3) if audio > 0 else 0,
            "cancelled": cancelled,
            "sample_rate": req.sample_rate if req else None,
            "format": req.format if req else None,
            "speaker": self.voice,
            "engine": engine,
        }
