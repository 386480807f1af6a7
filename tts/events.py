"""Server events of ``/v1/tts/ws`` (docs/specs/tts-ws.md §3.1, E1–E4, TS1, §6, §9; ``words``:
issue 35): typed values.

Each event is a frozen dataclass whose fields are in wire order; ``server_message`` is the one
place that turns them into the JSON object sent (fields that are None are left out; an error's
fields sit under ``error``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from gateway.wording import retry_after

PROTOCOL_VERSION = 2


@dataclass(frozen=True)
class Pong:
    """R9: the answer to ``ping``, exactly ``{"event": "pong"}``."""

    EVENT: ClassVar[str] = "pong"


@dataclass(frozen=True)
class Header:
    """E1: legacy fields first, then the additive ones."""

    EVENT: ClassVar[str] = "header"
    request_id: str
    sample_rate: int
    format: str
    model_version: str
    speaker: str
    engine: str
    encoding: str
    channels: int = 1
    protocol_version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class Progress:
    """E2: after every N-th binary frame."""

    EVENT: ClassVar[str] = "progress"
    chunks_sent: int
    bytes_sent: int
    elapsed_ms: int
    request_id: str
    audio_ms: int
    segment_seq: int | None = None  # timestamps only


@dataclass(frozen=True)
class SegmentStart:
    """TS1: immediately before a segment's first frame."""

    EVENT: ClassVar[str] = "segment_start"
    request_id: str
    seq: int
    text: str
    char_start: int
    char_end: int
    start_ms: int


@dataclass(frozen=True)
class SegmentEnd:
    """TS1: immediately after a segment's last frame."""

    EVENT: ClassVar[str] = "segment_end"
    request_id: str
    seq: int
    end_ms: int


@dataclass(frozen=True)
class Words:
    """Issue 35: a segment's words, before or with the frame their audio starts in."""

    EVENT: ClassVar[str] = "words"
    request_id: str
    seq: int
    words: list[dict[str, Any]]


@dataclass(frozen=True)
class Complete:
    """E3: the request's last event, with its metrics."""

    EVENT: ClassVar[str] = "complete"
    request_id: str
    metrics: dict[str, Any]


@dataclass(frozen=True)
class Flushed:
    """I4: every frame of the text before the flush is sent."""

    EVENT: ClassVar[str] = "flushed"
    request_id: str
    flush_id: str | int


@dataclass(frozen=True)
class Cleared:
    """C2: buffered text and unsent audio are dropped."""

    EVENT: ClassVar[str] = "cleared"
    request_id: str


@dataclass(frozen=True)
class ServerWarning:
    """E4: a notice that ends nothing."""

    EVENT: ClassVar[str] = "warning"
    code: str
    message: str
    request_id: str | None = None


@dataclass(frozen=True)
class Error:
    """§6: the reference error envelope plus ``fatal``, ``retry_after_ms`` (X3) and
    ``valid_speakers`` (X4)."""

    EVENT: ClassVar[str] = "error"
    code: str
    message: str
    request_id: str
    fatal: bool = True
    retry_after_ms: int | None = None
    valid_speakers: list[str] | None = None


ServerEvent = (
    Pong
    | Header
    | Progress
    | SegmentStart
    | SegmentEnd
    | Words
    | Complete
    | Flushed
    | Cleared
    | ServerWarning
    | Error
)


SERVER_EVENTS: dict[str, type[ServerEvent]] = {
    cls.EVENT: cls
    for cls in (
        Pong,
        Header,
        Progress,
        SegmentStart,
        SegmentEnd,
        Words,
        Complete,
        Flushed,
        Cleared,
        ServerWarning,
        Error,
    )
}


def server_message(event: ServerEvent) -> dict[str, Any]:
    """The JSON object of ``event``: ``event`` first, then its fields that are not None."""
    body = {
        f.name: value
        for f in dataclasses.fields(event)
        if (value := getattr(event, f.name)) is not None
    }
    if isinstance(event, Error):
        return {"event": event.EVENT, "error": body}
    return {"event": event.EVENT, **body}


def rate_limit_message(retry_after_ms: int) -> str:
    """X3: the reference wording with N = ⌈retry_after_ms ÷ 1000⌉."""
    return f"Rate limit exceeded. {retry_after(retry_after_ms)}"
