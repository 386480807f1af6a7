"""What the realtime session's pure steps ask of the consumer: output records, done by its
``perform``; and an item as the gateway sees it.

``RealtimeSession`` (``asr/session.py``) and the client steps (``asr/steps.py``) return these
plain outputs (what to tell the worker, what to tell the client, what to meter); the consumer
performs them. The records both apps share (``Arm``, ``Disarm``, the ``Fail`` base) are
``gateway.link.outputs``'s; the error records are ``asr.errors``'s, the echoes ``asr.events``'s.
Pure dataclasses, no I/O (STYLE 6); the TTS counterpart is ``tts/outputs.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from asr.messages import FINAL
from asr.whisper import MODEL_RATE


@dataclass(frozen=True)
class ItemOptions:
    """Decoding options an item keeps from its first audio on (SE-8)."""

    language: str | None
    prompt: str
    logprobs: bool
    transcript: str = FINAL  # asr.messages.TRANSCRIPT_SOURCES
    words: bool = False  # completed carries word times (extension)


@dataclass(eq=False)
class Item:
    """One item as the gateway sees it."""

    seq: int
    item_id: str
    boundary: int  # session clock at the item's start
    buf: bytearray = field(default_factory=bytearray, repr=False)
    buf_start: int = (
        0  # clock of buf[0]; from speech start on, buf is the retained audio
    )
    speech: bool = False
    sent: int = 0  # retained samples forwarded to the worker
    opened: bool = False
    options: ItemOptions | None = None
    input_ms: float = 0.0  # audio accepted since the boundary, in input terms (IT-4)
    emitted: str = field(default="", repr=False)
    logprobs: list[dict[str, Any]] = field(default_factory=list, repr=False)
    previous_item_id: str | None = None
    commit_point: int | None = None
    committed_at: float = 0.0
    finished: bool = False
    held: list[Out] = field(default_factory=list, repr=False)

    @property
    def retained(self) -> int:
        """Retained samples (0 before speech when trimming)."""
        return len(self.buf) // 2 if self.speech else 0

    @property
    def usage_seconds(self) -> float:
        """IT-11: commit point minus boundary, in seconds."""
        assert self.commit_point is not None
        return round((self.commit_point - self.boundary) / MODEL_RATE, 3)


@dataclass(frozen=True)
class OpenItem:
    """Send asr.job.item_open (first audio, option change, or replay)."""

    item: Item
    stream: bool


@dataclass(frozen=True)
class Forward:
    """Send retained PCM from ``offset`` (samples from the retained start)."""

    item: Item
    offset: int
    pcm: bytes


@dataclass(frozen=True)
class WorkerCommit:
    """Send asr.job.commit."""

    item: Item
    total: int


@dataclass(frozen=True)
class Drop:
    """Send asr.job.drop."""

    item: Item


@dataclass(frozen=True)
class SpeechStarted:
    """server_vad: speech started in ``item`` at ``ms`` (VD-4)."""

    item: Item
    ms: int


@dataclass(frozen=True)
class SpeechStopped:
    """server_vad: speech stopped at ``ms`` (VD-5)."""

    item: Item
    ms: int


@dataclass(frozen=True)
class Committed:
    """The item is committed: committed + added/created now (IT-3)."""

    item: Item


@dataclass(frozen=True)
class Delta:
    """Transcript text of an item (IT-7, IT-8)."""

    item: Item
    text: str
    logprobs: list[dict[str, Any]] | None


@dataclass(frozen=True)
class Completed:
    """The item's transcript (IT-11, IT-15), then item.done; its logprobs (IT-10) and word
    times (IT-16) when asked for."""

    item: Item
    transcript: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    logprobs: list[dict[str, Any]] | None = None
    words: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Failed:
    """The final decode failed (IT-12), then item.done with a null transcript."""

    item: Item


@dataclass(frozen=True)
class Overflow:
    """An item's retained audio passed ``ASR_MAX_BUFFER_S`` (AI-1 step 6), or with
    ``pending`` the audio of every unfinished item passed ``ASR_MAX_PENDING_S``."""

    pending: bool = False


Out = (
    OpenItem
    | Forward
    | WorkerCommit
    | Drop
    | SpeechStarted
    | SpeechStopped
    | Committed
    | Delta
    | Completed
    | Failed
    | Overflow
)

WorkerOut = OpenItem | Forward | WorkerCommit | Drop


def words_from_item_start(
    words: list[dict[str, Any]] | None, item: Item
) -> list[dict[str, Any]] | None:
    """Word times of the item's retained audio as seconds from the item's start (its
    boundary): the audio ``usage.seconds`` counts, trimmed non-speech included."""
    if words is None:
        return None
    shift = (item.buf_start - item.boundary) / MODEL_RATE
    return [
        {**w, "start": round(w["start"] + shift, 3), "end": round(w["end"] + shift, 3)}
        for w in words
    ]
