"""Gateway ↔ worker contracts of a realtime ASR job (docs/specs/realtime-asr.md §13).

The channel types keep this project's backbone names (``asr.job.*`` to the worker, ``gpu.asr.*``
and ``gpu.job.*`` back); the fields are the spec's. PCM is int16 little-endian at 16 kHz.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.contracts import Message

LogProbs = list[dict[str, Any]] | None
# What an item's transcript is (the session's ``transcript`` option, IT-15).
FINAL = "final"  # the final decode of the item's whole audio; deltas are its preview
DELTAS = "deltas"  # the deltas joined exactly
TRANSCRIPT_SOURCES = (FINAL, DELTAS)


@dataclass(frozen=True)
class AsrOpen(Message):
    """First message of an ASR session job; ``job_id`` is the stream id."""

    TYPE = "asr.job.open"
    reply_channel: str
    deadline: float
    model: str

    @classmethod
    def first(cls, model: str) -> AsrOpen:
        """The message ``WorkerLink.submit`` sends, naming each attempt's job, its reply
        channel and its deadline."""
        return cls(job_id="", reply_channel="", deadline=0.0, model=model)


@dataclass(frozen=True)
class AsrItemOpen(Message):
    """Start an item, or update its options (``stream``, ``logprobs``) if it exists (WK-3)."""

    TYPE = "asr.job.item_open"
    item_seq: int
    language: str | None = None
    prompt: str = field(default="", repr=False)
    stream: bool = False
    prefix_text: str = field(default="", repr=False)
    logprobs: bool = False
    words: bool = False  # time the final decode's words (realtime extension, REST)
    segments: bool = False  # Whisper's segments of the final decode (REST verbose_json)
    transcript: str = FINAL  # TRANSCRIPT_SOURCES


@dataclass(frozen=True)
class AsrAudio(Message):
    """New 16 kHz int16 PCM for an item, starting at sample ``offset`` of the item."""

    TYPE = "asr.job.audio"
    item_seq: int
    offset: int
    pcm: bytes = field(repr=False)


@dataclass(frozen=True)
class AsrCommit(Message):
    """The item is complete at ``total_samples``; decode it in full."""

    TYPE = "asr.job.commit"
    item_seq: int
    total_samples: int


@dataclass(frozen=True)
class AsrDrop(Message):
    """Forget an item (the client cleared the buffer)."""

    TYPE = "asr.job.drop"
    item_seq: int


@dataclass(frozen=True)
class AsrDelta(Message):
    """Confirmed text of an item; never retracted."""

    TYPE = "gpu.asr.delta"
    item_seq: int
    text: str = field(repr=False)
    logprobs: LogProbs = field(default=None, repr=False)


@dataclass(frozen=True)
class AsrFinal(Message):
    """The item's final decode: its last delta ``text`` (the remainder after every delta
    already sent) and, with the "final" option, the item's ``transcript``."""

    TYPE = "gpu.asr.final"
    item_seq: int
    text: str = field(repr=False)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    logprobs: LogProbs = field(default=None, repr=False)
    audio_ms: int = 0
    decode_ms: int = 0
    # With ``AsrItemOpen.words``: the final decode's words as ``{"word", "start", "end"}``,
    # seconds from the item's start; None when not asked for or the engine lacks their times.
    words: list[dict[str, Any]] | None = field(default=None, repr=False)
    # The item's transcript with the "final" option; None with "deltas" (every delta joined).
    transcript: str | None = field(default=None, repr=False)
    transcript_logprobs: LogProbs = field(default=None, repr=False)
    # With ``AsrItemOpen.segments``: Whisper's segments (``streaming.timed_segments``).
    segments: list[dict[str, Any]] | None = field(default=None, repr=False)
    # The language of the final decode (ISO-639-1), the item's or the one the engine
    # detected; None from an engine (or an older worker) that does not say.
    language: str | None = None


@dataclass(frozen=True)
class AsrResync(Message):
    """The worker's buffer disagrees with ``offset``; resend the item from ``have_samples``."""

    TYPE = "gpu.asr.resync"
    item_seq: int
    have_samples: int
