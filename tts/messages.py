"""Gateway ↔ worker contracts of a TTS job (specs/tts-ws.md §11 Q6)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from veena_site.contracts import Message


@dataclass(frozen=True)
class TtsSubmit(Message):
    """First message of a TTS job: the whole request, already validated and segmented."""

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


@dataclass(frozen=True)
class TtsAck(Message):
    """The gateway handed every chunk up to ``seq`` to the socket (flow control, Q8)."""

    TYPE = "tts.job.ack"
    seq: int


@dataclass(frozen=True)
class TtsChunk(Message):
    """One frame of final-format audio; ``seq`` counts 0, 1, 2, … without gaps."""

    TYPE = "gpu.tts.chunk"
    seq: int
    segment_seq: int
    data: bytes = field(repr=False)
    samples: int


@dataclass(frozen=True)
class TtsDone(Message):
    """The job produced all its audio; ``samples`` is the output sample count."""

    TYPE = "gpu.tts.done"
    samples: int
    chunks: int
    engine_ms: int
