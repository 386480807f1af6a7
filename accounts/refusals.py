"""Every refused request of an authenticated key leaves a record (issue 30 item 3).

The first ``REFUSALS_KEPT`` refusals of a key, route and error code in an hour are written
each as its own record (searchable by request id). After that this process only counts
them, and every ``FLUSH_S`` adds the counts to one row per key, route, code and hour
(``services.refusals``): a flood of refusals costs one write a second per distinct
(key, route, code), not one per request. A process killed mid-flood loses at most
``FLUSH_S`` of counted refusals; they bill nothing either way.

Failures before authentication (no key, a bad key, a key not allowed on the endpoint) are
no account's usage: they are counted in ``veena_auth_failures_total`` by reason only.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from channels.db import database_sync_to_async
from django.db import DatabaseError
from django.utils import timezone

from accounts.exceptions import AdmissionDenied, MissingApiKey
from accounts.services.refusals import (
    Refusal,
    usage_refusal_record,
    usage_refusals_fold,
)
from accounts.services.rollups import floor_bucket
from accounts.services.usage import this_instance
from gateway import metrics
from gateway.background import detached
from gateway.outages import log_failure

logger = logging.getLogger(__name__)

REFUSALS_KEPT = (
    20  # per key, route, code and hour in this process: records of their own
)
FLUSH_S = 1.0

Bucket = tuple[uuid.UUID, str, str, datetime]


class RefusalRecorder:
    """This process's refusal counts: which were written, which wait to be folded."""

    def __init__(self) -> None:
        self.kept: Counter[Bucket] = Counter()
        self.hour: datetime | None = None
        self.pending: dict[Bucket, tuple[Refusal, int]] = {}
        self.flusher: asyncio.Task[None] | None = None

    async def record(self, refusal: Refusal) -> None:
        """Write ``refusal`` now, or count it for the next fold."""
        hour = floor_bucket(refusal.at, "hour")
        if hour != self.hour:
            self.hour, self.kept = hour, Counter()
        bucket = (refusal.api_key_id, refusal.route, refusal.error_code, hour)
        self.kept[bucket] += 1
        if self.kept[bucket] <= REFUSALS_KEPT:
            try:
                await database_sync_to_async(usage_refusal_record)(refusal=refusal)
                return
            except DatabaseError:
                logger.warning(
                    "refusal of key %s not recorded: folded later", refusal.api_key_id
                )
        self._fold_later(bucket, refusal, 1)

    def _fold_later(self, bucket: Bucket, refusal: Refusal, count: int) -> None:
        _, waiting = self.pending.get(bucket, (refusal, 0))
        self.pending[bucket] = (refusal, waiting + count)
        if self.flusher is None or self.flusher.done():
            self.flusher = detached(self._flush_soon())  # outlives the request

    async def _flush_soon(self) -> None:
        await asyncio.sleep(FLUSH_S)
        await self.flush()

    async def flush(self) -> None:
        """Fold every counted refusal into its row now (a failed fold waits for the next);
        called from outside, it also ends the wait of the scheduled fold."""
        pending, self.pending = self.pending, {}
        flusher, self.flusher = self.flusher, None
        if flusher is not None and flusher is not asyncio.current_task():
            flusher.cancel()
        for bucket, (refusal, count) in pending.items():
            try:
                await database_sync_to_async(usage_refusals_fold)(
                    refusal=refusal, count=count
                )
            except DatabaseError:
                logger.warning("%d refusals not folded yet", count)
                self._fold_later(bucket, refusal, count)


_recorder = RefusalRecorder()


async def record_refusal(
    *,
    account_id: int,
    api_key_id: uuid.UUID,
    endpoint: str,
    route: str,
    error_code: str,
    request_id: str,
    close_code: int | None = None,
    model: str = "",
) -> None:
    """Record one refused request of an authenticated key; never raises."""
    refusal = Refusal(
        account_id=account_id,
        api_key_id=api_key_id,
        endpoint=endpoint,
        route=route,
        error_code=error_code,
        request_id=request_id,
        at=timezone.now(),
        close_code=close_code,
        model=model,
        instance=this_instance(),
    )
    try:
        await _recorder.record(refusal)
    except Exception:  # boundary: a refusal's record never fails the refusal itself
        log_failure(logger, "refusal of key %s not recorded", api_key_id)


async def flush_refusals() -> None:
    """Fold what this process counted now (tests, and a stopping gateway)."""
    await _recorder.flush()


@contextmanager
def auth_failures_counted(*, endpoint: str) -> Iterator[None]:
    """Count a refusal of the block (authentication) in the metric, by reason: before
    the key is known a refusal is no account's usage."""
    try:
        yield
    except AdmissionDenied as denied:
        missing = isinstance(denied, MissingApiKey)
        reason = "missing_api_key" if missing else denied.reason
        metrics.AUTH_FAILURES.labels(endpoint or "none", reason).inc()
        raise
