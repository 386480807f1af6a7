"""Submissions no worker has answered yet, per consumer channel, and the abandon drains.

A consumer's channel outlives each of its links (a new TTS request, a realtime failover), so
submissions are kept per channel: job id → its answer deadline. ``WorkerLink.abandon()`` drains
a channel only while one of them may still be answered, as a task of its own tracked here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from channels.layers import BaseChannelLayer

from gateway.contracts import JobAccepted
from gateway.link.receiving import receive_until

MAX_CHANNELS = 10_000  # consumers that never ended through abandon(): forget them all
# A worker may accept a submission this long after its deadline by its own clock (clock skew
# between machines, the reply's own trip); a drain listens that much longer.
ANSWER_GRACE_S = 1.0

Cancel = Callable[[str, str], Awaitable[None]]  # (worker channel, job id)

_pending: dict[str, dict[str, float]] = {}
_drains: set[asyncio.Task[None]] = set()


def note(channel: str, job_id: str, deadline: float) -> None:
    """Submission ``job_id`` of ``channel`` may be answered until ``deadline``."""
    if len(_pending) > MAX_CHANNELS:
        _pending.clear()
    _pending.setdefault(channel, {})[job_id] = deadline


def answered(channel: str, job_id: object) -> None:
    """A worker answered submission ``job_id`` of ``channel`` (accepted, busy or not ready)."""
    pending = _pending.get(channel)
    if pending is not None:
        pending.pop(str(job_id), None)
        if not pending:
            del _pending[channel]


def take(channel: str) -> dict[str, float]:
    """The channel's unanswered submissions, no longer tracked here."""
    return _pending.pop(channel, {})


def waiting(channel: str) -> bool:
    """Whether ``channel`` has a submission no worker has answered yet."""
    return channel in _pending


async def cancel_late_acceptances(
    layer: BaseChannelLayer, channel: str, cancel: Cancel
) -> None:
    """Read ``channel`` while one of its submissions may still be accepted, and cancel each
    acceptance at its worker (the drain of ``WorkerLink.abandon()``)."""
    pending = take(channel)
    if not pending:  # every submission was answered: no acceptance can still come
        return
    until = max(pending.values()) + ANSWER_GRACE_S
    while pending and (left := until - time.time()) > 0:
        try:
            # Not wait_for(receive): a cancelled receive can lose another
            # consumer's message (gateway.link.receiving).
            message = await receive_until(layer, channel, left)
        except Exception:  # boundary: the layer is down: jobs time out
            return
        if message is None:
            return
        pending.pop(str(message.get("job_id")), None)
        if message.get("type") == JobAccepted.TYPE:
            accepted = JobAccepted.from_message(message)
            await cancel(accepted.worker_channel, accepted.job_id)


def drain(work: Coroutine[Any, Any, None]) -> None:
    """Run an abandon drain as a task of its own (callable from a cancelled ``finally``)."""
    task = asyncio.ensure_future(work)
    _drains.add(task)
    task.add_done_callback(_drains.discard)


async def abandoned_links_drained() -> None:
    """Wait until every drain of this loop has finished (tests; each ≤ 1.5 s, none when
    every submission was answered)."""
    loop = asyncio.get_running_loop()
    mine = [task for task in _drains if task.get_loop() is loop]
    if mine:
        await asyncio.gather(*mine, return_exceptions=True)
