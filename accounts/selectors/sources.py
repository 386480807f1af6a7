"""Which rollup rows answer a filter (accounts D5): the table, the granularity, the spans.

The chart, the cards and the CSV read one source granularity: daily rows when every
bucket is a whole UTC day, hourly rows otherwise (hour buckets, or days of a zone that is
not UTC), so they add up to the same totals. A table summed over the whole range reads
the coarsest rows that hold it: daily rows for the settled whole UTC days inside it,
hourly rows around them (``settled_day_spans``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import QuerySet
from django.utils.dateparse import parse_datetime

from accounts import buckets as bk
from accounts.models.api_keys import ApiKey
from accounts.models.choices import Granularity
from accounts.models.rollups import AccountRollup, RollupMeasures, UsageRollup
from accounts.selectors import Scope


@dataclass(frozen=True)
class UsageFilter:
    """The validated filters of a dashboard page, CSV or usage-API call.

    The range is the local days ``first`` … ``last``; a rolling range (the default hour
    view, the last 48 hours) starts inside the first day, at the UTC hour ``since``.
    """

    first: date
    last: date
    tz: ZoneInfo
    width: bk.BucketWidth
    keys: tuple[ApiKey, ...] = ()
    routes: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    since: datetime | None = None

    def buckets(self, now: datetime) -> list[bk.Bucket]:
        """The chart buckets of the range that have begun by ``now``."""
        items = bk.buckets(
            first=self.first, last=self.last, tz=self.tz, width=self.width, now=now
        )
        return self._from_since(items)

    def days(self, now: datetime) -> list[bk.Bucket]:
        """The local days of the range (latency is shown per day; the rows read for a
        rolling range begin at ``since``, so its first day holds only its own hours)."""
        items = bk.buckets(
            first=self.first, last=self.last, tz=self.tz, width="day", now=now
        )
        return self._from_since(items)

    def window(self) -> tuple[datetime, datetime]:
        """``[start, end)`` of the range in UTC."""
        start, end = bk.window(self.first, self.last, self.tz)
        return (start if self.since is None else max(start, self.since)), end

    def _from_since(self, items: list[bk.Bucket]) -> list[bk.Bucket]:
        """The buckets that end after ``since``: every hour from it on, the day it is in."""
        if self.since is None:
            return items
        return [b for b in items if b.end > self.since]


def source_granularity(items: Sequence[bk.Bucket]) -> str:
    """Daily rows when every bucket is a whole UTC day; hourly rows otherwise."""
    return Granularity.DAY if bk.is_utc_aligned(items) else Granularity.HOUR


Q_ = TypeVar("Q_", bound=QuerySet[Any])


def stored_moment(text: str) -> datetime:
    """A stored instant read as text (``Cast(..., CharField())``): with its offset
    (PostgreSQL), or naive UTC (SQLite). Large reads fetch bucket starts as text and parse
    each distinct one once, rather than a datetime built for every row."""
    value = parse_datetime(text)
    if value is None:
        raise ValueError(f"not a datetime: {text!r}")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def narrowed(
    rows: Q_,
    *,
    scope: Scope,
    key_ids: Iterable[uuid.UUID],
    routes: Iterable[str],
    models: Iterable[str],
) -> Q_:
    """Rollups or records of the scope, narrowed to the keys, routes and models given."""
    if scope.account is not None:
        rows = rows.filter(account=scope.account)
    if key_ids := list(key_ids):
        rows = rows.filter(api_key_id__in=key_ids)
    if routes := list(routes):
        rows = rows.filter(route__in=routes)
    if models := list(models):
        rows = rows.filter(model__in=models)
    return rows


def rollup_rows(
    *,
    scope: Scope,
    since: datetime,
    until: datetime,
    granularity: str,
    key_ids: Iterable[uuid.UUID] = (),
    routes: Iterable[str] = (),
    models: Iterable[str] = (),
    endpoint: str | None = None,
    per_key: bool = True,
) -> QuerySet[Any]:
    """The rollup rows of ``scope`` in ``[since, until)`` that match the filters.

    ``per_key=False`` reads the account totals (AccountRollup), unless keys are named.
    """
    key_ids = list(key_ids)
    table: type[RollupMeasures] = UsageRollup if per_key or key_ids else AccountRollup
    rows = table._default_manager.filter(
        granularity=granularity, bucket_start__gte=since, bucket_start__lt=until
    )
    rows = narrowed(rows, scope=scope, key_ids=key_ids, routes=routes, models=models)
    if endpoint is not None:
        rows = rows.filter(endpoint=endpoint)
    return rows.order_by()


def filtered_rows(
    *,
    scope: Scope,
    flt: UsageFilter,
    items: Sequence[bk.Bucket],
    per_key: bool = False,
) -> QuerySet[Any]:
    """The rows behind ``items`` (the chart buckets) under the filter.

    Without a key filter the charts need no key column, so they read AccountRollup.
    """
    return rollup_rows(
        scope=scope,
        since=items[0].start,
        until=items[-1].end,
        granularity=source_granularity(items),
        key_ids=[k.id for k in flt.keys],
        routes=flt.routes,
        models=flt.models,
        per_key=per_key,
    )


def settled_day_spans(
    since: datetime, until: datetime, now: datetime
) -> list[tuple[str, datetime, datetime]]:
    """``[since, until)`` as hourly edges around whole UTC days that no run changes any
    more (older than the hourly lookback), which the daily rows answer exactly."""
    settled = bk.floor_hour(now - timedelta(hours=settings.ROLLUP_LOOKBACK_HOURS + 1))
    first = since.replace(hour=0)
    if first < since:
        first += timedelta(days=1)
    last = min(until, settled).replace(hour=0)
    if since.minute or first >= last:
        return [(Granularity.HOUR, since, until)]
    spans = [
        (Granularity.HOUR, since, first),
        (Granularity.DAY, first, last),
        (Granularity.HOUR, last, until),
    ]
    return [(g, lo, hi) for g, lo, hi in spans if lo < hi]


def range_spans(
    items: Sequence[bk.Bucket], now: datetime
) -> list[tuple[str, datetime, datetime]]:
    """The coarsest rows that hold the whole range: daily rows for its settled UTC days,
    hourly rows around them (a table summed over the range needs no bucket column)."""
    since, until = items[0].start, items[-1].end
    if source_granularity(items) == Granularity.DAY:
        return [(Granularity.DAY, since, until)]
    return settled_day_spans(since, until, now)
