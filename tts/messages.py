"""Gateway ↔ worker contracts of a TTS job (docs/specs/tts-ws.md §11 Q6).

The engine options of a request (``Sampling``, with the reference defaults, R1) are stated once
here: the wire request (``tts.protocol.TtsRequest``), the job's first message and the engine's
segment (``tts.worker.engines.base.TtsEngineRequest``) inherit them, and ``sampling_of`` copies them
from one stage to the next. A segment travels as ``{"seq", "text" (normalised), "char_start", "char_end"}``. ``epoch`` counts
the request's ``clear`` events (C2): chunks of an older epoch are dropped by the gateway.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.contracts import Message
from tts.audio import DEFAULT_FORMAT, DEFAULT_RATE

FlushId = str | int
DEFAULT_CHUNK_WINDOW = 32  # TTS_CHUNK_WINDOW's default


@dataclass(frozen=True, kw_only=True)
class Sampling:
    """Speed and the sampling options, with the reference defaults."""

    speed: float = 1.0
    seed: int | None = None
    temperature: float = 0.8
    top_k: int = 50
    top_p: float = 1.0
    max_tokens: int = 4096
    repetition_penalty: float = 1.05


DEFAULTS = Sampling()
SAMPLING_FIELDS = tuple(f.name for f in dataclasses.fields(Sampling))


def sampling_of(source: Sampling) -> dict[str, Any]:
    """The sampling fields of ``source`` as keyword arguments for the next stage."""
    return {name: getattr(source, name) for name in SAMPLING_FIELDS}


@dataclass(frozen=True)
class TtsSubmit(Message, Sampling):
    """First message of a TTS job: the request, validated and segmented (maybe partly)."""

    TYPE = "tts.job.submit"
    reply_channel: str
    deadline: float
    voice: str
    segments: list[dict[str, Any]] = field(repr=False)
    format: str = DEFAULT_FORMAT
    sample_rate: int = DEFAULT_RATE
    request_id: str = ""
    # More segments follow in tts.job.text and the job ends at tts.job.end (§9.2, long texts).
    incremental: bool = False
    # Mark each segment's words on the chunks (issue 35).
    word_timestamps: bool = False
    # Normalise each segment just before it is spoken (T1; false: verbatim, T5).
    normalize: bool = True


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
    the worker that the gateway is still there (``gateway.worker.jobs.CONFIRM_S``).
    """

    TYPE = "tts.job.ack"
    seq: int


def ack_interval(window: int) -> int:
    """Q8: ack every 8th chunk, more often when the worker's window is smaller than 16."""
    return max(1, min(8, window // 2))


@dataclass
class ChunkOrder:
    """Q8 where the audio arrives (the consumer and the REST job client): chunks count
    0, 1, 2, … without gaps, every ``ack_interval``-th is acknowledged, and ``done`` counts
    them all."""

    window: int  # the worker's TTS_CHUNK_WINDOW
    next_seq: int = 0

    def take(self, seq: int) -> bool:
        """Count chunk ``seq``; False, counting nothing, when it is not the next one (a gap)."""
        if seq != self.next_seq:
            return False
        self.next_seq += 1
        return True

    @property
    def ack_due(self) -> bool:
        """True when the chunk just taken is one to acknowledge."""
        return self.next_seq % ack_interval(self.window) == 0

    def complete(self, chunks: int) -> bool:
        """True when ``gpu.tts.done``'s count is the number of chunks taken (no gap at the end)."""
        return chunks == self.next_seq


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
    # Words whose audio starts in (or before the end of) this chunk: ``{"word", "start_ms",
    # "end_ms"}``, ms from the chunk's first sample (issue 35).
    words: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def timed_words(self, before_ms: float) -> list[dict[str, Any]]:
        """``words`` in ms from the start of the request's audio, ``before_ms`` of which
        came before this chunk (never before 0)."""
        return [
            {
                "word": w["word"],
                "start_ms": max(0, round(before_ms + w["start_ms"])),
                "end_ms": max(0, round(before_ms + w["end_ms"])),
            }
            for w in self.words
        ]


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
