"""Usage read from rollups only (accounts D5): series, totals, breakdowns and latency.

The chart, the cards and the CSV read one source granularity: daily rows when every
bucket is a whole UTC day, hourly rows otherwise (hour buckets, or days of a zone that is
not UTC), so they add up to the same totals. Local days read from hourly rows are bucketed
in SQL (``bucketed``: ``date_trunc`` at the zone), so a 90-day page fetches 90 rows per
series, not 2,160. The breakdown tables are sums over the whole range, so they read the
coarsest rows that hold it: daily rows for the settled whole UTC days inside it, hourly rows
around them (``settled_day_spans``), all three tables from one such read. The number of
queries does not grow with the number of keys or buckets.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import (
    BigIntegerField,
    DateTimeField,
    ExpressionWrapper,
    F,
    Max,
    Q,
    QuerySet,
    Sum,
    Value,
)
from django.db.models.functions import Cast, TruncDay

from accounts import buckets as bk
from accounts.histogram import ASR_LATENCY_FIELDS, TTFB_FIELDS, percentile
from accounts.models.accounts import Account
from accounts.models.api_keys import ApiKey
from accounts.models.choices import Granularity, Route
from accounts.models.rollups import AccountRollup, RollupMeasures, UsageRollup
from accounts.selectors import Scope
from accounts.services.rollups import MAX_FIELDS, SUM_FIELDS

SUMMED = SUM_FIELDS
MAXED = MAX_FIELDS
Measures = dict[str, int]
# Abandoned records carry no code: the reaper ended them (accounts U10).
ABANDONED_CODE = "abandoned"
UNKNOWN_CODE = "unknown"


def zero() -> Measures:
    """Measures with nothing counted."""
    return dict.fromkeys((*SUMMED, *MAXED), 0)


_SUMMED, _MAXED = frozenset(SUMMED), frozenset(MAXED)
HISTOGRAMS = (*TTFB_FIELDS, *ASR_LATENCY_FIELDS)
# What tables and the CSV show: everything but the latency histograms.
TOTALS = tuple(name for name in SUMMED if name not in HISTOGRAMS)


def add_into(total: Measures, row: dict[str, Any]) -> None:
    """Add one aggregate row to ``total`` in place (sums add, maxima take the larger)."""
    for name, value in row.items():
        if not value:
            continue
        if name in _SUMMED:
            total[name] += int(value)
        elif name in _MAXED:
            total[name] = max(total[name], int(value))


def aggregates(*, histograms: bool = True) -> dict[str, Any]:
    """SUM (and MAX) of every measure; without the 36 histogram columns when not needed."""
    summed = SUMMED if histograms else TOTALS
    # PostgreSQL sums bigints as numeric; a bigint result skips Decimal parsing.
    return {
        **{name: Cast(Sum(name), BigIntegerField()) for name in summed},
        **{name: Max(name) for name in MAXED},
    }


def zero_totals() -> Measures:
    """Like ``zero()``, without the histogram bins (tables and the CSV)."""
    return dict.fromkeys((*TOTALS, *MAXED), 0)


@dataclass(frozen=True)
class UsageFilter:
    """The validated filters of a dashboard page, CSV or usage-API call."""

    first: date
    last: date
    tz: ZoneInfo
    width: bk.BucketWidth
    keys: tuple[ApiKey, ...] = ()
    routes: tuple[str, ...] = ()
    models: tuple[str, ...] = ()

    def buckets(self, now: datetime) -> list[bk.Bucket]:
        """The chart buckets of the range that have begun by ``now``."""
        return bk.buckets(
            first=self.first, last=self.last, tz=self.tz, width=self.width, now=now
        )

    def days(self, now: datetime) -> list[bk.Bucket]:
        """The local days of the range (latency is shown per day)."""
        return bk.buckets(
            first=self.first, last=self.last, tz=self.tz, width="day", now=now
        )


def source_granularity(items: Sequence[bk.Bucket]) -> str:
    """Daily rows when every bucket is a whole UTC day; hourly rows otherwise."""
    return Granularity.DAY if bk.is_utc_aligned(items) else Granularity.HOUR


Q_ = TypeVar("Q_", bound=QuerySet[Any])


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


def _range_spans(
    items: Sequence[bk.Bucket], now: datetime
) -> list[tuple[str, datetime, datetime]]:
    """The coarsest rows that hold the whole range: daily rows for its settled UTC days,
    hourly rows around them (a table summed over the range needs no bucket column)."""
    since, until = items[0].start, items[-1].end
    if source_granularity(items) == Granularity.DAY:
        return [(Granularity.DAY, since, until)]
    return settled_day_spans(since, until, now)


BREAKDOWN_GROUP = ("account_id", "api_key_id", "route", "model")


def _range_totals(
    scope: Scope,
    flt: UsageFilter,
    items: Sequence[bk.Bucket],
    now: datetime,
    group: Sequence[str],
    *,
    per_key: bool,
) -> dict[tuple[Any, ...], Measures]:
    """Measures summed over the whole range, per ``group`` values."""
    totals: dict[tuple[Any, ...], Measures] = {}
    for granularity, lo, hi in _range_spans(items, now):
        rows = rollup_rows(
            scope=scope,
            since=lo,
            until=hi,
            granularity=granularity,
            key_ids=[k.id for k in flt.keys],
            routes=flt.routes,
            models=flt.models,
            per_key=per_key,
        )
        for row in rows.values(*group).annotate(**aggregates(histograms=False)):
            values = tuple(row.pop(name) for name in group)
            add_into(totals.setdefault(values, zero()), row)
    return totals


def _summed(
    totals: dict[tuple[Any, ...], Measures], position: slice
) -> dict[tuple[Any, ...], Measures]:
    """``totals`` summed again over a coarser group: the values at ``position``."""
    result: dict[tuple[Any, ...], Measures] = {}
    for values, measures in totals.items():
        add_into(result.setdefault(values[position], zero()), measures)
    return result


def _key_totals(totals: dict[tuple[Any, ...], Measures]) -> list[Breakdown]:
    """Per-key totals of the range: the key column is only needed summed over it."""
    per_key = _summed(totals, slice(1, 2))
    keys = ApiKey.objects.in_bulk([key_id for (key_id,) in per_key])
    result = [
        Breakdown(label=keys[key_id].display, measures=m, key=keys[key_id])
        for (key_id,), m in per_key.items()
    ]
    return sorted(result, key=lambda b: (-b.measures["requests"], b.label))


def fold(
    starts: Sequence[datetime], grouped: Iterable[dict[str, Any]], size: int
) -> list[Measures]:
    """Source rows grouped by ``bucket_start``, added into the bucket that holds each."""
    folded = [zero() for _ in range(size)]
    for row in grouped:
        index = bk.bucket_of(starts, row["bucket_start"])
        if index is not None and index < size:
            add_into(folded[index], row)
    return folded


@dataclass(frozen=True)
class Breakdown:
    """One row of a breakdown table: what it is, and its measures."""

    label: str
    measures: Measures
    key: ApiKey | None = None
    route: str = ""
    model: str = ""
    account: Account | None = None


@dataclass
class UsageReport:
    """Everything a usage page shows, from one source granularity."""

    buckets: list[bk.Bucket]
    series: list[Measures]
    totals: Measures
    errors: dict[str, list[int]]
    days: list[bk.Bucket]
    latency: list[Measures]
    by_key: list[Breakdown]
    by_route_model: list[Breakdown]
    by_account: list[Breakdown] = field(default_factory=list)
    data_as_of: datetime | None = None
    granularity: str = Granularity.HOUR


def _errors(rows: QuerySet[Any], locate: Locate, size: int) -> dict[str, list[int]]:
    """Failed and abandoned requests per error code and bucket (``rows`` bucketed)."""
    by_code: dict[str, list[int]] = defaultdict(lambda: [0] * size)
    grouped = (
        rows.filter(Q(failed__gt=0) | Q(abandoned__gt=0))
        .values("bucket", "error_code")
        .annotate(
            failed_sum=Cast(Sum("failed"), BigIntegerField()),
            abandoned_sum=Cast(Sum("abandoned"), BigIntegerField()),
        )
    )
    for row in grouped:
        index = locate(row["bucket"])
        if index is None:
            continue
        if row["failed_sum"]:
            by_code[row["error_code"] or UNKNOWN_CODE][index] += row["failed_sum"]
        if row["abandoned_sum"]:
            by_code[ABANDONED_CODE][index] += row["abandoned_sum"]
    return dict(sorted(by_code.items()))


def _by_account(totals: dict[tuple[Any, ...], Measures]) -> list[Breakdown]:
    """Totals per account (the staff view), busiest first."""
    per_account = _summed(totals, slice(0, 1))
    accounts = Account.objects.in_bulk([account_id for (account_id,) in per_account])
    result = [
        Breakdown(
            label=accounts[account_id].name,
            measures=measures,
            account=accounts[account_id],
        )
        for (account_id,), measures in per_account.items()
    ]
    return sorted(result, key=lambda b: (-b.measures["requests"], b.label))


def _by_route_model(totals: dict[tuple[Any, ...], Measures]) -> list[Breakdown]:
    labels = dict(Route.choices)
    result = [
        Breakdown(
            label=f"{labels.get(route, route)} · {model}",
            measures=measures,
            route=route,
            model=model,
        )
        for (route, model), measures in _summed(totals, slice(2, 4)).items()
    ]
    return sorted(result, key=lambda b: (b.route, b.model))


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


def _series(
    rows: QuerySet[Any],
    *,
    source: str,
    tz: ZoneInfo,
    width: str,
    items: Sequence[bk.Bucket],
    histograms: bool,
) -> tuple[list[Measures], datetime | None]:
    """Measures per bucket of ``items``, and when the newest row read was computed."""
    annotated, locate = bucketed(rows, source=source, tz=tz, width=width, items=items)
    grouped = annotated.values("bucket").annotate(
        **aggregates(histograms=histograms), as_of=Max("computed_at")
    )
    folded = [zero() for _ in items]
    as_of: datetime | None = None
    for row in grouped:
        index = locate(row.pop("bucket"))
        row_as_of = row.pop("as_of")
        if index is None:
            continue
        add_into(folded[index], row)
        if row_as_of is not None and (as_of is None or row_as_of > as_of):
            as_of = row_as_of
    return folded, as_of


def usage_report(*, scope: Scope, flt: UsageFilter, now: datetime) -> UsageReport:
    """The usage page of ``scope`` under ``flt``: a bounded number of queries."""
    items = flt.buckets(now)
    days = flt.days(now)
    if not items:
        return UsageReport(items, [], zero(), {}, days, [], [], [])
    rows = filtered_rows(scope=scope, flt=flt, items=items)
    source = source_granularity(items)
    # Latency is per day; in day buckets the series is the same grouping.
    latency, as_of = _series(
        rows, source=source, tz=flt.tz, width="day", items=days, histograms=True
    )
    if flt.width == "day":
        series = latency
    else:
        series, as_of = _series(
            rows, source=source, tz=flt.tz, width="hour", items=items, histograms=False
        )
    totals = zero()
    for measures in series:
        add_into(totals, measures)
    if flt.width == "hour":  # the cards' percentiles: the days hold the histograms
        for name in HISTOGRAMS:
            totals[name] = sum(day[name] for day in latency)
    # Every breakdown table from one read of the range's coarsest rows.
    breakdowns = _range_totals(scope, flt, items, now, BREAKDOWN_GROUP, per_key=True)
    bucketed_rows, locate = bucketed(
        rows, source=source, tz=flt.tz, width=flt.width, items=items
    )
    return UsageReport(
        buckets=items,
        series=series,
        totals=totals,
        errors=_errors(bucketed_rows, locate, len(items)),
        days=days,
        latency=latency,
        by_key=_key_totals(breakdowns),
        by_route_model=_by_route_model(breakdowns),
        by_account=_by_account(breakdowns) if scope.is_global else [],
        data_as_of=as_of,
        granularity=source,
    )


def errors_of(measures: Measures) -> int:
    """Errors: failed plus abandoned (accounts D4)."""
    return measures["failed"] + measures["abandoned"]


def latency_of(measures: Measures) -> dict[str, float | None]:
    """TTFB and ASR p50/p95 and averages of some measures, in milliseconds."""
    ttfb = [measures[name] for name in TTFB_FIELDS]
    asr = [measures[name] for name in ASR_LATENCY_FIELDS]
    return {
        "ttfb_p50": percentile(ttfb, 0.5, maximum=measures["ttfb_ms_max"]),
        "ttfb_p95": percentile(ttfb, 0.95, maximum=measures["ttfb_ms_max"]),
        "asr_p50": percentile(asr, 0.5, maximum=measures["asr_latency_ms_max"]),
        "asr_p95": percentile(asr, 0.95, maximum=measures["asr_latency_ms_max"]),
        "ttfb_avg": measures["ttfb_ms_sum"] / measures["ttfb_count"]
        if measures["ttfb_count"]
        else None,
        "asr_avg": measures["asr_latency_ms_sum"] / measures["asr_items"]
        if measures["asr_items"]
        else None,
    }
