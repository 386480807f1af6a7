"""The embedded default's in-process channel layer, with channel names nobody can repeat.

Channels' ``InMemoryChannelLayer.new_channel`` draws names from the ``random`` module, whose
state any library (or a test framework: hypothesis seeds it for every example) may set. Two
consumers given the same name read each other's messages: a worker's acceptance meant for the
new socket is taken by the previous one's drain (``WorkerLink.abandon``) and the new session
never opens. Names here come from the operating system's generator instead.

It also honours ``channel_capacity`` (the worker channels' larger capacity, as on Redis):
``InMemoryChannelLayer`` stores that dict uncompiled and fails on the first receive.

And it sweeps expired messages at most every ``SWEEP_EVERY_S``: ``InMemoryChannelLayer`` walks
every channel and group on every send and receive, and with 200 sockets that walk took about
a third of the event loop (py-spy, issue 17's soak). A message may so outlive its expiry
(60 s) by up to a second.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from channels.layers import InMemoryChannelLayer

SWEEP_EVERY_S = 1.0


class EmbeddedChannelLayer(InMemoryChannelLayer):
    """``InMemoryChannelLayer`` whose specific channel names are ``secrets`` tokens."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        raw: dict[str, int] = kwargs.get("channel_capacity") or {}
        self.channel_capacity = self.compile_capacities(raw)
        self._swept_at = float("-inf")

    def _clean_expired(self) -> None:
        """Channels' sweep of expired messages and group memberships, at most every
        ``SWEEP_EVERY_S``."""
        now = time.monotonic()
        if now - self._swept_at < SWEEP_EVERY_S:
            return
        self._swept_at = now
        super()._clean_expired()

    async def new_channel(self, prefix: str = "specific.") -> str:
        """A new process-specific channel name (96 random bits)."""
        return f"{prefix}.inmemory!{secrets.token_hex(12)}"
