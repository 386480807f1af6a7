"""Tick a REST call's usage while its iterator runs (accounts E6: checkpoint, key, lease).

A stop reason (revoked key, lost lease, plan's session length) ends the iteration with
``AdmissionDenied(reason)``; the source is closed on every exit.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Protocol, TypeVar

from accounts.exceptions import AdmissionDenied, DenialReason
from tts.usage import TICK_S

T = TypeVar("T")


class Ticks(Protocol):
    """A usage that can be ticked (``TtsUsage``, ``RealtimeUsage``)."""

    async def tick(self) -> DenialReason | None:
        """Checkpoint and check; the stop reason."""
        ...


async def _tick_until_stop(usage: Ticks) -> DenialReason:
    while True:
        await asyncio.sleep(TICK_S)
        reason = await usage.tick()
        if reason is not None:
            return reason


async def ticked(
    usage: Ticks, source: AsyncGenerator[T, None]
) -> AsyncGenerator[T, None]:
    """The items of ``source``, while ``usage`` ticks every ``TICK_S`` in a task of its own."""
    ticker = asyncio.create_task(_tick_until_stop(usage))
    step: asyncio.Future[T] | None = None
    try:
        while True:
            step = asyncio.ensure_future(anext(source))
            done, _ = await asyncio.wait(
                {step, ticker}, return_when=asyncio.FIRST_COMPLETED
            )
            if step not in done:
                raise AdmissionDenied(ticker.result())
            try:
                item = step.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        for task in (step, ticker):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        await source.aclose()
