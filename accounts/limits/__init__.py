"""The process's limits store: ``RedisLimiter`` with ``REDIS_URL``, else ``MemoryLimiter`` (B2)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from django.conf import settings

from accounts.exceptions import AdmissionDenied, LimitsUnavailable
from accounts.limits.base import Decision, Limiter, QuotaGrant
from accounts.limits.memory import MemoryLimiter
from accounts.limits.redis import RedisLimiter

__all__ = [
    "Decision",
    "Limiter",
    "MemoryLimiter",
    "QuotaGrant",
    "RedisLimiter",
    "get_limiter",
    "in_store",
    "reset_limiters",
    "single_flight",
]

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


@functools.cache
def _limiter_for(redis_url: str, prefix: str) -> Limiter:
    if redis_url:
        return RedisLimiter.from_url(redis_url, prefix=prefix)
    return MemoryLimiter()


def get_limiter() -> Limiter:
    """The limiter for the current settings; one per process and configuration."""
    return _limiter_for(settings.REDIS_URL, settings.REDIS_KEY_PREFIX)


def reset_limiters() -> None:
    """Forget every limiter (tests: a fresh in-process store)."""
    _limiter_for.cache_clear()


@contextmanager
def single_flight(name: str, *, ttl_s: float) -> Iterator[bool]:
    """Hold the store lock ``name`` for the block; yields False when another run has it (G7)."""
    limiter = get_limiter()
    token = limiter.try_lock(name, int(ttl_s * 1000))
    if token is None:
        logger.info("%s already running elsewhere; skipped", name)
        yield False
        return
    try:
        yield True
    finally:
        limiter.unlock(name, token)


async def in_store(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run a limiter call off the event loop; an unreachable store denies (E4)."""
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    except LimitsUnavailable:
        logger.warning("limits store unreachable")
        raise AdmissionDenied("limits_unavailable") from None
