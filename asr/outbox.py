"""The realtime consumer's queue of messages for its pinned worker (WK-7).

Messages leave in order; a full worker channel (``ChannelFull``) keeps them queued and is
retried, and a queue that stays blocked past the stall limit means the worker is lost.
"""

from __future__ import annotations

import enum
import time
from collections import deque

from gateway.contracts import Message
from gateway.jobclient import WorkerLink


class Flush(enum.Enum):
    """What a flush left: nothing, a blocked queue to retry, or a stalled worker."""

    DONE = enum.auto()
    RETRY = enum.auto()
    STALLED = enum.auto()


class WorkerOutbox:
    """Messages not yet accepted by the worker's channel, oldest first."""

    def __init__(self, stall_s: float) -> None:
        self.stall_s = stall_s
        self.queue: deque[Message] = deque()
        self.full_since: float | None = None  # monotonic, while the channel is full

    def append(self, message: Message) -> None:
        """Queue one message behind the others."""
        self.queue.append(message)

    def clear(self) -> None:
        """Forget every queued message (failover replays them; release drops them)."""
        self.queue.clear()
        self.full_since = None

    async def flush(self, link: WorkerLink) -> Flush:
        """Send queued messages in order until the channel is full or the queue empty."""
        while self.queue:
            if not await link.send(self.queue[0]):
                now = time.monotonic()
                self.full_since = self.full_since or now
                stalled = now - self.full_since > self.stall_s
                return Flush.STALLED if stalled else Flush.RETRY
            self.queue.popleft()
            self.full_since = None
        return Flush.DONE
