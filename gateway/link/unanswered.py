"""Submissions no worker has answered yet, per consumer channel, and the abandon drains.

A consumer's channel outlives each of its links (a new TTS request, a realtime failover), so
submissions are kept per channel: job id → its answer deadline. ``WorkerLink.abandon()`` drains
a channel only while one of them may still be answered, as a task of its own tracked here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

MAX_CHANNELS = 10_000  # consumers that never ended through abandon(): forget them all

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
