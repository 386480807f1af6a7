"""Gateway ↔ worker contracts of a TTS job (specs/tts-ws.md §11 Q6).

A segment travels as ``{"seq", "text" (normalised), "char_start", "char_end"}``. ``epoch`` counts
the request's ``clear`` events (C2): chunks of an older epoch are dropped by the gateway.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from gateway.contracts import Message

FlushId = str | int


@dataclass(frozen=True)
class TtsSubmit(Message):
    """First message of a TTS job: the request, validated and segmented (maybe partly)."""

    TYPE = "tts.job.submit"
    reply_channel: str
    deadline: float
    voice: str
    segments: list[dict[str, Any]] = field(repr=False)
    format: str = "wav"
    sample_rate: int = 16_000
    speed: float = 1.0
    seed: int | None = None
    temperature: float = 0.8
    top_k: int = 50
    top_p: float = 1.0
    max_tokens: int = 4096
    repetition_penalty: float = 1.05
    request_id: str = ""
    # More segments follow in tts.job.text and the job ends at tts.job.end (§9.2, long texts).
    incremental: bool = False


@dataclass(frozen=True)
class TtsText(Message):
    """More segments of the job, in order, for ``epoch``."""

    TYPE = "tts.job.text"
    epoch: int
    segments: list[dict[str, Any]] = field(repr=False)


@dataclass(frozen=True)
class TtsFlush(Message):
    """Send the audio of every segment so far, then answer ``gpu.tts.flushed``."""

    TYPE = "tts.job.flush"
    epoch: int
    flush_id: FlushId


@dataclass(frozen=True)
class TtsEnd(Message):
    """No more text: finish the audio and answer ``gpu.tts.done``."""

    TYPE = "tts.job.end"
    epoch: int


@dataclass(frozen=True)
class TtsClear(Message):
    """Drop pending text and unsent audio; later segments belong to ``epoch``."""

    TYPE = "tts.job.clear"
    epoch: int


@dataclass(frozen=True)
class TtsAck(Message):
    """The gateway handed every chunk up to ``seq`` to the socket (flow control, Q8).

    The first ack, ``seq`` −1, is sent on acceptance; like every message of the job it tells
    the worker that the gateway is still there (``gateway.jobs.CONFIRM_S``).
    """

    TYPE = "tts.job.ack"
    seq: int


def ack_interval(window: int) -> int:
    """Q8: ack every 8th chunk, more often when the worker's window is smaller than 16."""
    return max(1, min(8, window // 2))


@dataclass(frozen=True)
class TtsChunk(Message):
    """One frame of final-format audio; ``seq`` counts 0, 1, 2, … without gaps."""

    TYPE = "gpu.tts.chunk"
    seq: int
    segment_seq: int
    data: bytes = field(repr=False)
    samples: int
    epoch: int = 0
    segment_start: bool = False
    segment_end: bool = False
    # When the worker sent it (its clock): the gateway observes the hop (veena_channel_hop_seconds).
    sent_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class TtsFlushed(Message):
    """Every frame of the text before flush ``flush_id`` has been sent."""

    TYPE = "gpu.tts.flushed"
    flush_id: FlushId


@dataclass(frozen=True)
class TtsDone(Message):
    """The job produced all its audio; ``samples`` is the output sample count."""

    TYPE = "gpu.tts.done"
    samples: int
    chunks: int
    engine_ms: int
    frames_dropped: int = 0
    truncated: bool = False
    # Token engines (vllm-snac, AU7): SNAC frames decoded, ids generated, ids ignored.
    snac_frames: int = 0
    tokens: int = 0
    tokens_ignored: int = 0
