"""Timers of an API consumer, delivered through its own channel (tts Q5, realtime LM-3/LM-4).

Named one-shot timers: each arm posts ``timer.fire`` named ``<name>:<n>``; re-arming or
disarming makes an earlier firing stale, so a timer already in the channel queue is ignored
instead of acting late. A ``Ticker`` posts one name periodically. ``post_patiently`` is how a
worker link's own timers reach the channel.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer

from gateway.outages import cancel_pending

# accounts E6 asks for a usage tick at least once a second; half that keeps a revocation's stop
# within accounts E7's 1 s even when the tick waits behind a client event or audio.
TICK_S = 0.5
TICK = "tick"  # the usage tick's timer name on a consumer's own channel
POST_RETRY_S = 0.05  # a timer that finds the consumer's channel full is posted again
POST_PATIENCE_S = 10.0  # full this long: the consumer no longer reads its channel

logger = logging.getLogger(__name__)

PostLater = Callable[[float, str], "asyncio.Task[None]"]
Post = Callable[[str], Awaitable[bool]]  # False: not posted (channel full)


class NamedTimers:
    """At most one pending timer per name."""

    def __init__(self, post_later: PostLater) -> None:
        self._post_later = post_later
        self._pending: dict[str, tuple[int, asyncio.Task[None]]] = {}
        self._count = 0

    def arm(self, name: str, delay: float) -> None:
        """(Re)start ``name`` to fire after ``delay`` seconds."""
        self.disarm(name)
        self._count += 1
        task = self._post_later(delay, f"{name}:{self._count}")
        self._pending[name] = (self._count, task)

    def armed(self, name: str) -> bool:
        """True while ``name`` is pending."""
        return name in self._pending

    def disarm(self, *names: str) -> None:
        """Stop the named timers."""
        for name in names:
            entry = self._pending.pop(name, None)
            if entry is not None:
                entry[1].cancel()

    def disarm_all(self) -> None:
        """Stop every timer (the consumer owns their tasks, STYLE 22)."""
        self.disarm(*list(self._pending))

    def fired(self, posted: str) -> str | None:
        """The timer's name when ``posted`` is its current firing, else None (stale)."""
        name, _, count = posted.partition(":")
        entry = self._pending.get(name)
        if entry is None or str(entry[0]) != count:
            return None
        del self._pending[name]
        return name


class Ticker:
    """A periodic ``timer.fire`` on the consumer's own channel (accounts E6, tts Q5).

    The consumer owns the task (STYLE 22): ``stop()`` cancels and awaits it. At most one tick
    waits in the channel; the next is posted once the consumer called ``ticked()``. A tick
    left unhandled for ``abandon_s`` means the consumer died without ``disconnect()``: the
    task then ends by itself.
    """

    abandon_s = 60.0

    def __init__(self, post: Post, name: str, every_s: float) -> None:
        self._post = post
        self.name = name
        self.every_s = every_s
        self._task: asyncio.Task[None] | None = None
        self._waiting = False
        self._posted_at = 0.0

    def start(self) -> None:
        """Start posting (idempotent)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    def ticked(self) -> None:
        """The posted tick was handled: the next one may be posted."""
        self._waiting = False

    async def stop(self) -> None:
        """Cancel the task and wait for it to end (idempotent)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.every_s)
            if self._waiting and loop.time() - self._posted_at > self.abandon_s:
                return
            if not self._waiting:
                # Set before the send: the consumer may handle the tick during it.
                self._waiting, self._posted_at = True, loop.time()
                try:
                    posted = await self._post(self.name)
                except (
                    Exception
                ):  # boundary: one tick (a Redis blip); the next tries again
                    posted = False
                    if not cancel_pending():
                        logger.warning("tick %s not posted", self.name, exc_info=True)
                if cancel_pending():
                    return  # stopped during a post that turned the cancel into a
                    # failure, raised or returned: the next sleep would not see it
                if not posted:
                    self._waiting = False


async def post_patiently(
    layer: BaseChannelLayer, channel: str, message: dict[str, Any]
) -> bool:
    """Post ``message`` to a consumer's own channel, again while the channel is full; False
    when it stayed full for ``POST_PATIENCE_S``."""
    deadline = time.monotonic() + POST_PATIENCE_S
    while True:
        try:
            await layer.send(channel, message)
            return True
        except ChannelFull:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(POST_RETRY_S)
