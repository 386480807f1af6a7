"""What a stream may leave behind, read from outside: gauges, slots, leases, records, tasks.

Issue 9 asks that every exit path of a consumer or view gives back everything it holds; these
helpers read each of those resources the way an operator would (``/metrics``, the limiter, the
database) so tests can assert that nothing is left once a socket is gone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from channels.db import database_sync_to_async


def active_streams(endpoint: str) -> float:
    """``veena_active_streams{endpoint}`` as /metrics shows it.

    Collected from the gauge alone: the whole registry (process collector included) costs a
    millisecond a read, and the fuzz rig reads it in a tight loop after every case.
    """
    from gateway.metrics import ACTIVE_STREAMS

    for family in ACTIVE_STREAMS.collect():
        for sample in family.samples:
            if sample.labels.get("endpoint") == endpoint:
                return float(sample.value)
    return 0.0


@database_sync_to_async
def started_records() -> int:
    """Usage records still ``started``."""
    from accounts.models.usage import UsageRecord

    return UsageRecord.objects.filter(status="started").count()


async def settled(check: Callable[[], Awaitable[bool]], timeout: float = 3.0) -> bool:
    """Poll ``check`` until it holds or ``timeout`` passes; True when it held."""
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)


def encodable(text: str) -> bool:
    """True when a server text frame can go out as UTF-8 (Daphne encodes it so)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def error_logs(records: list[logging.LogRecord]) -> list[logging.LogRecord]:
    """Records at ERROR or above that carry a traceback (Django's plain "Internal Server
    Error" line for a 500 the view chose to send is not one)."""
    return [r for r in records if r.levelno >= logging.ERROR and r.exc_info]
