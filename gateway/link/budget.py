"""A per-stream budget for control events (issue 9): a token bucket, pure state.

``ping``, ``flush``, ``clear`` and the other control events each cost a worker message or a
reply, so a stream gets ``WS_CONTROL_BURST`` of them at once and ``WS_CONTROL_RATE`` per second
after that; audio and text are bounded by their own size limits instead.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings


@dataclass
class ControlBudget:
    """``burst`` events at once, refilled at ``rate`` per second."""

    rate: float
    burst: int
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    tokens: float = -1.0
    at: float = 0.0

    def __post_init__(self) -> None:
        if self.tokens < 0:
            self.tokens = float(self.burst)
        self.at = self.clock()

    @classmethod
    def from_settings(cls) -> ControlBudget:
        """The budget of ``WS_CONTROL_RATE`` and ``WS_CONTROL_BURST``."""
        return cls(rate=settings.WS_CONTROL_RATE, burst=settings.WS_CONTROL_BURST)

    def take(self) -> bool:
        """Spend one event; False when the stream is over its budget."""
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True

    def retry_after_ms(self) -> int:
        """When the next event would fit again, in whole ms (at least 1)."""
        missing = max(0.0, 1 - self.tokens)
        return max(1, math.ceil(missing / self.rate * 1000)) if self.rate else 1000
