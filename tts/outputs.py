"""What the TTS stream's pure steps ask of the consumer: output records, done by its ``perform``.

The records both apps share (``Arm``, ``Disarm``, the ``Fail`` base) are ``gateway.link.outputs``'s;
``tts.steps``, ``tts.forwarding``, ``tts.incremental`` and ``tts.requests`` decide and hold no
consumer; the consumer does the I/O (socket, worker link, timers, usage meter): ``perform`` for
these records, and its request start, acceptance and end around them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from gateway.contracts import Message
from gateway.link.outputs import Arm, Disarm, Fail
from tts.events import Error, ServerEvent
from tts.protocol import End, Flush, TextInput, TtsProtocolError, TtsRequest

WorkerKind = Literal["text", "flush", "end", "clear", "ack"]


@dataclass(frozen=True)
class Send:
    """Send one server event."""

    event: ServerEvent


@dataclass(frozen=True)
class Frame:
    """Send one binary frame and count its samples (U2); ``ttfb_s`` for the first audio,
    ``segment_chars`` when it is a segment's last frame (docs/accounting.md)."""

    data: bytes
    samples: int
    ttfb_s: float | None = None
    segment_chars: int = 0


@dataclass(frozen=True)
class Ack:
    """Q8: acknowledge chunks up to ``seq`` once the transport has taken what was sent."""

    seq: int


@dataclass(frozen=True)
class ToWorker:
    """Send the message ``build(job_id)`` to the pinned worker; ``required`` ones that
    cannot be sent fail the request."""

    kind: WorkerKind
    build: Callable[[str], Message]
    required: bool = True


@dataclass(frozen=True)
class TtsFail(Fail):
    """End the request (and the stream when fatal) with one §6 error.

    ``fatal`` None: §6/K1 decide from the code and ``keep_alive`` (the stream's when None);
    ``close_code`` None: the code's own; ``usage_error``: the record's ``error_code`` when it
    is not the wire code's (an accounts reason, U3).
    """

    code: str
    message: str
    close_code: int | None = None
    request_id: str | None = None
    keep_alive: bool | None = None
    fatal: bool | None = None
    usage_error: str | None = None
    retry_after_ms: int | None = None
    valid_speakers: list[str] | None = None


def refusal(
    exc: TtsProtocolError, *, request_id: str, keep_alive: bool | None
) -> TtsFail:
    """A message or request that cannot be used, as its §6 error."""
    return TtsFail(
        exc.code,
        exc.message,
        close_code=exc.close_code,
        request_id=request_id,
        keep_alive=keep_alive,
        **exc.extra,
    )


def error_event(error: TtsFail, request_id: str, *, fatal: bool) -> Error:
    """The §6 error event of ``error``, its message within 500 characters."""
    return Error(
        error.code,
        error.message[:500],
        request_id,
        fatal,
        retry_after_ms=error.retry_after_ms,
        valid_speakers=error.valid_speakers,
    )


@dataclass(frozen=True)
class Start:
    """Start a request (L1 steps 4–8)."""

    req: TtsRequest


@dataclass(frozen=True)
class Finish:
    """Complete the active request (E3), cancelled or not."""

    cancelled: bool


@dataclass(frozen=True)
class Input:
    """Apply ``text``, ``flush`` or ``end`` to the active incremental request (§9.2)."""

    event: TextInput | Flush | End


@dataclass(frozen=True)
class ClearInput:
    """C2 on the active incremental request."""


@dataclass(frozen=True)
class InputTimer:
    """I3's buffer delay or I6's input idle limit fired."""

    name: str


@dataclass(frozen=True)
class SentTimer:
    """Look at a held ack again (Q8)."""


InputStep = Input | ClearInput | InputTimer  # done by ``IncrementalInput.apply``
Out = (
    Send
    | Frame
    | Ack
    | ToWorker
    | Arm
    | Disarm
    | TtsFail
    | Start
    | Finish
    | Input
    | ClearInput
    | InputTimer
    | SentTimer
)
