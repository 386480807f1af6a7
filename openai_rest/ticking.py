"""Tick a REST call's usage while its iterator runs (accounts E6: checkpoint, key, lease).

A stop reason (revoked key, lost lease, plan's session length) ends the iteration with
``AdmissionDenied(reason)``; the source is closed on every exit.

The tick runs in the task that iterates, never in a task of its own: a task started inside
the view would inherit the view's sync-to-async context, which Django closes when the view
returns, and the streamed body (iterated by Django afterwards) could no longer reach the
database.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from typing import Protocol, TypeVar

from accounts.exceptions import AdmissionDenied, DenialReason
from gateway.link.timers import TICK_S

T = TypeVar("T")


class Ticks(Protocol):
    """A usage that can be ticked (``TtsUsage``, ``RealtimeUsage``)."""

    async def tick(self) -> DenialReason | None:
        """Checkpoint and check; the stop reason."""
        ...


async def ticked(
    usage: Ticks, source: AsyncGenerator[T, None]
) -> AsyncGenerator[T, None]:
    """The items of ``source``, ticking ``usage`` at least every ``TICK_S`` while it waits."""
    due = time.monotonic() + TICK_S
    step: asyncio.Future[T] | None = None
    try:
        while True:
            step = asyncio.ensure_future(anext(source))
            while True:
                left = due - time.monotonic()
                if left > 0:
                    done, _ = await asyncio.wait({step}, timeout=left)
                    if done:
                        break
                reason = await usage.tick()
                due = time.monotonic() + TICK_S
                if reason is not None:
                    raise AdmissionDenied(reason)
            try:
                item = step.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        if step is not None and not step.done():
            step.cancel()
            with contextlib.suppress(BaseException):
                await step
        await source.aclose()
