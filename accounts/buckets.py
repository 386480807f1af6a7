"""Chart buckets in the viewer's time zone, built from hourly UTC rollups (pure functions).

Rollups are stored per UTC hour (and per UTC day, built from the hours). A viewer sees
hours or days of their own zone:

* an hour bucket is one UTC hour, labelled in local time (a DST fall-back shows two
  01:00 hours, told apart by their offset; a spring-forward day has no gap);
* a day bucket runs from one local midnight to the next: 23, 24 or 25 UTC hours. In a
  zone whose offset is not a whole hour (Asia/Kolkata, +05:30) local midnight falls inside
  a UTC hour; the day then starts at that UTC hour's start, so every hour still belongs to
  exactly one day and no usage is counted twice or lost.

Only buckets that have begun are listed; the one that contains ``now`` is partial.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from gateway.wording import count

BucketWidth = Literal["hour", "day"]
HOUR = timedelta(hours=1)
# Ranges the dashboard and the usage API accept, in local days (inclusive).
MAX_HOUR_RANGE_DAYS = 31
MAX_DAY_RANGE_DAYS = 400


@dataclass(frozen=True)
class Bucket:
    """One chart bucket: ``[start, end)`` in UTC, and how the viewer reads it."""

    start: datetime
    end: datetime
    label: str
    partial: bool

    @property
    def hours(self) -> int:
        """How many UTC hours the bucket spans (23, 24 or 25 for a day across DST)."""
        return int((self.end - self.start) / HOUR)


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``; ``ValueError`` when there is no such zone."""
    if name not in _zone_names():
        raise ValueError(f"unknown time zone {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}") from None


def _zone_names() -> set[str]:
    global _ZONES
    if _ZONES is None:
        _ZONES = available_timezones() | {"UTC"}
    return _ZONES


_ZONES: set[str] | None = None


def floor_hour(moment: datetime) -> datetime:
    """The start of the UTC hour that contains ``moment``."""
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def local_midnight(day: date, tz: ZoneInfo) -> datetime:
    """The UTC hour start at which local ``day`` begins (see the module docstring).

    A midnight that does not exist (a DST jump at 00:00) resolves to the first local
    instant of the day, as ``zoneinfo`` reads a missing wall time with the earlier offset.
    """
    return floor_hour(datetime(day.year, day.month, day.day, tzinfo=tz))


def local_date(moment: datetime, tz: ZoneInfo) -> date:
    """The local day whose bucket holds ``moment``: its calendar date in ``tz``, or the
    next day in a zone whose midnight falls inside a UTC hour, from that hour's start on
    (at 23:51 in Kolkata the day bucket that holds the current UTC hour is tomorrow's)."""
    day = moment.astimezone(tz).date()
    following = day + timedelta(days=1)
    return following if moment >= local_midnight(following, tz) else day


def window(first: date, last: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """``[start, end)`` in UTC of the local days ``first`` … ``last`` (inclusive)."""
    assert first <= last, (first, last)
    return local_midnight(first, tz), local_midnight(last + timedelta(days=1), tz)


def range_error(first: date, last: date, width: BucketWidth) -> str | None:
    """Why a range is refused (reversed, or longer than the width allows), or None."""
    if last < first:
        return "The range ends before it starts."
    days = (last - first).days + 1
    limit = MAX_HOUR_RANGE_DAYS if width == "hour" else MAX_DAY_RANGE_DAYS
    if days > limit:
        return f"{width.capitalize()} buckets cover at most {count(limit, 'day')}."
    return None


def _hour_label(start: datetime, tz: ZoneInfo) -> str:
    local = start.astimezone(tz)
    label = f"{local:%Y-%m-%d %H:%M}"
    # A wall time that happens twice (DST fall-back) carries its offset.
    if local.replace(fold=0).utcoffset() != local.replace(fold=1).utcoffset():
        label += " " + local.isoformat()[-6:]
    return label


def buckets(
    *, first: date, last: date, tz: ZoneInfo, width: BucketWidth, now: datetime
) -> list[Bucket]:
    """The buckets of local days ``first`` … ``last`` that have begun by ``now``."""
    start, end = window(first, last, tz)
    result: list[Bucket] = []
    if width == "hour":
        moment = start
        while moment < end and moment <= now:
            result.append(
                Bucket(
                    moment, moment + HOUR, _hour_label(moment, tz), now < moment + HOUR
                )
            )
            moment += HOUR
        return result
    day = first
    while day <= last:
        lo, hi = window(day, day, tz)
        if lo > now:
            break
        result.append(Bucket(lo, hi, day.isoformat(), now < hi))
        day += timedelta(days=1)
    return result


def bucket_of(starts: Sequence[datetime], moment: datetime) -> int | None:
    """The index of the bucket (given by sorted ``starts``) that contains ``moment``.

    None when ``moment`` is before the first bucket; the caller bounds the last one.
    """
    index = bisect_right(starts, moment) - 1
    return index if index >= 0 else None


def is_utc_aligned(items: Sequence[Bucket]) -> bool:
    """True when every bucket is a whole UTC day, so daily rollups answer exactly."""
    return bool(items) and all(
        b.start.hour == 0 and b.end - b.start == timedelta(days=1) for b in items
    )
