"""Output records both stream consumers share, and how a stream's usage record ends.

A stream's pure steps return output records and its consumer's one ``perform``
(``gateway.link.consumers``) does their I/O. Each app has records of its own (``tts.outputs``,
``asr.outputs``); these are the ones that mean the same in both: (re)arm or stop one of the
consumer's own timers, and end with an error (each app's failure record derives from ``Fail``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# How a stream, or one request of it, ends: the usage record's terminal statuses (accounts U8).
TerminalStatus = Literal["completed", "cancelled", "failed"]


@dataclass(frozen=True)
class Arm:
    """(Re)start one of the consumer's timers."""

    name: str
    delay: float


@dataclass(frozen=True)
class Disarm:
    """Stop some of the consumer's timers."""

    names: tuple[str, ...]


class Fail:
    """The base of each app's failure record (``tts.outputs.TtsFail``, ``asr.errors.RealtimeFail``):
    ``perform`` hands it to the consumer's ``fail`` and does nothing after it."""

    code: str  # the protocol's error code
