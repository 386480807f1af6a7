"""State of one realtime session: pure dataclasses, no I/O (STYLE 6)."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

from asr.protocol import new_id


class AsrState(enum.Enum):
    """Lifecycle of a session; CLOSED is terminal."""

    ADMITTING = enum.auto()
    OPEN = enum.auto()
    CLOSED = enum.auto()


@dataclass
class PendingItem:
    """A committed item waiting for its transcript."""

    item_id: str
    committed_at: float
    emitted: str = ""


@dataclass
class AsrSession:
    """Input format, the open item and the committed items of one connection."""

    session_id: str = field(default_factory=lambda: new_id("sess_"))
    state: AsrState = AsrState.ADMITTING
    input_format: str = "audio/pcm"
    input_rate: int = 24_000
    language: str | None = "en"
    prompt: str = ""
    model: str = ""
    item_seq: int = 0
    item_id: str = field(default_factory=lambda: new_id("item_"))
    item_samples: int = 0
    item_opened: bool = False
    previous_item_id: str | None = None
    pending: dict[int, PendingItem] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)

    def commit(self) -> tuple[int, PendingItem]:
        """Close the open item; the next audio starts a fresh one."""
        seq, item = self.item_seq, PendingItem(self.item_id, time.monotonic())
        self.pending[seq] = item
        self.previous_item_id = self.item_id
        self.item_seq += 1
        self.item_id = new_id("item_")
        self.item_samples = 0
        self.item_opened = False
        return seq, item

    def clear(self) -> int:
        """Drop the open item's audio; returns the dropped item's seq."""
        seq = self.item_seq
        self.item_seq += 1
        self.item_id = new_id("item_")
        self.item_samples = 0
        self.item_opened = False
        return seq

    def session_object(self, expires_at: int) -> dict[str, Any]:
        """The GA transcription session object."""
        fmt: dict[str, Any] = {"type": self.input_format}
        if self.input_format == "audio/pcm":
            fmt["rate"] = self.input_rate
        return {
            "type": "transcription",
            "id": self.session_id,
            "object": "realtime.transcription_session",
            "expires_at": expires_at,
            "include": [],
            "audio": {
                "input": {
                    "format": fmt,
                    "transcription": {
                        "model": self.model,
                        "language": self.language,
                        "prompt": self.prompt,
                    },
                    "turn_detection": None,
                    "noise_reduction": None,
                }
            },
        }
