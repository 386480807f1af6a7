"""Rollup rows grouped into the buckets of a chart, in SQL wherever the zone allows.

Local days read from hourly rows are bucketed in SQL (``date_trunc`` at the zone), so a
90-day page fetches 90 rows per series, not 2,160.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.db.models import DateTimeField, ExpressionWrapper, F, Value
from django.db.models.functions import TruncDay

from accounts import buckets as bk
from accounts.models.choices import Granularity
from accounts.selectors.sources import Q_


def day_shift(days: Sequence[bk.Bucket], tz: ZoneInfo) -> timedelta | None:
    """How far to move an hour's start so that its local date is its bucket's day.

    Zero for whole-hour offsets; 30 or 15 minutes where local midnight falls inside a UTC
    hour (Asia/Kolkata, Asia/Kathmandu). None when that changes within the range (a
    half-hour DST, as on Lord Howe Island): then hours are folded in Python.
    """
    shifts = {(60 - d.start.astimezone(tz).minute) % 60 for d in days}
    return timedelta(minutes=shifts.pop()) if len(shifts) == 1 else None


Locate = Callable[[Any], "int | None"]


def bucketed(
    rows: Q_, *, source: str, tz: ZoneInfo, width: str, items: Sequence[bk.Bucket]
) -> tuple[Q_, Locate]:
    """``rows`` annotated with ``bucket`` to group by, and the bucket index of its value.

    Hour buckets and day buckets read from daily rows group by ``bucket_start`` itself.
    Local days read from hourly rows are bucketed in SQL (``date_trunc`` at the zone,
    after ``day_shift``), so the database returns one row per day, not per hour; only
    where no single shift fits (a half-hour DST) are the hours folded by the caller.
    """
    if width == "day" and source == Granularity.HOUR:
        shift = day_shift(items, tz)
        if shift is not None:
            moved = ExpressionWrapper(
                F("bucket_start") + Value(shift), output_field=DateTimeField()
            )
            by_date = {date.fromisoformat(d.label): i for i, d in enumerate(items)}
            return rows.annotate(bucket=TruncDay(moved, tzinfo=tz)), (
                lambda value: by_date.get(value.astimezone(tz).date())
            )
    starts = [b.start for b in items]
    exact = {start: index for index, start in enumerate(starts)}
    size = len(items)

    def locate(value: Any) -> int | None:
        index = exact.get(value)
        if index is None:
            index = bk.bucket_of(starts, value)
            if index is not None and index >= size:
                return None
        return index

    return rows.annotate(bucket=F("bucket_start")), locate
