"""Usage read from rollups only (accounts D5): series, totals, breakdowns and latency.

A report picks one source granularity for everything it shows, so the chart, the cards,
the tables and the CSV always add up to the same totals: daily rows when every bucket is a
whole UTC day, hourly rows otherwise (hour buckets, or days of a zone that is not UTC).
The number of queries does not grow with the number of keys or buckets.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
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
from accounts.models import (
    Account,
    AccountRollup,
    ApiKey,
    Granularity,
    RollupMeasures,
    Route,
    UsageRollup,
)
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


def _key_totals(
    scope: Scope, flt: UsageFilter, items: Sequence[bk.Bucket], now: datetime
) -> list[Breakdown]:
    """Per-key totals of the range: the key column is only needed summed over it."""
    since, until = items[0].start, items[-1].end
    spans = (
        [(Granularity.DAY, since, until)]
        if source_granularity(items) == Granularity.DAY
        else settled_day_spans(since, until, now)
    )
    totals: dict[uuid.UUID, Measures] = {}
    for granularity, lo, hi in spans:
        rows = rollup_rows(
            scope=scope,
            since=lo,
            until=hi,
            granularity=granularity,
            key_ids=[k.id for k in flt.keys],
            routes=flt.routes,
            models=flt.models,
        )
        for row in rows.values("api_key_id").annotate(**aggregates(histograms=False)):
            add_into(totals.setdefault(row["api_key_id"], zero()), row)
    keys = ApiKey.objects.in_bulk(list(totals))
    result = [
        Breakdown(label=keys[key_id].display, measures=m, key=keys[key_id])
        for key_id, m in totals.items()
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


def _errors(
    rows: QuerySet[Any], starts: Sequence[datetime], size: int
) -> dict[str, list[int]]:
    by_code: dict[str, list[int]] = defaultdict(lambda: [0] * size)
    grouped = (
        rows.filter(Q(failed__gt=0) | Q(abandoned__gt=0))
        .values("bucket_start", "error_code")
        .annotate(failed_sum=Sum("failed"), abandoned_sum=Sum("abandoned"))
    )
    for row in grouped:
        index = bk.bucket_of(starts, row["bucket_start"])
        if index is None or index >= size:
            continue
        if row["failed_sum"]:
            by_code[row["error_code"] or UNKNOWN_CODE][index] += row["failed_sum"]
        if row["abandoned_sum"]:
            by_code[ABANDONED_CODE][index] += row["abandoned_sum"]
    return dict(sorted(by_code.items()))


def _by_account(rows: QuerySet[Any]) -> list[Breakdown]:
    """Totals per account (the staff view), busiest first."""
    grouped = list(rows.values("account_id").annotate(**aggregates(histograms=False)))
    accounts = Account.objects.in_bulk([row["account_id"] for row in grouped])
    result = []
    for row in grouped:
        measures = zero()
        add_into(measures, row)
        account = accounts[row["account_id"]]
        result.append(Breakdown(label=account.name, measures=measures, account=account))
    return sorted(result, key=lambda b: (-b.measures["requests"], b.label))


def _by_route_model(rows: QuerySet[Any]) -> list[Breakdown]:
    labels = dict(Route.choices)
    result = []
    for row in rows.values("route", "model").annotate(**aggregates(histograms=False)):
        measures = zero()
        add_into(measures, row)
        route = row["route"]
        result.append(
            Breakdown(
                label=f"{labels.get(route, route)} · {row['model']}",
                measures=measures,
                route=route,
                model=row["model"],
            )
        )
    return sorted(result, key=lambda b: (b.route, b.model))


def day_shift(days: Sequence[bk.Bucket], tz: ZoneInfo) -> timedelta | None:
    """How far to move an hour's start so that its local date is its bucket's day.

    Zero for whole-hour offsets; 30 or 15 minutes where local midnight falls inside a UTC
    hour (Asia/Kolkata, Asia/Kathmandu). None when that changes within the range (a
    half-hour DST, as on Lord Howe Island): then hours are folded in Python.
    """
    shifts = {(60 - d.start.astimezone(tz).minute) % 60 for d in days}
    return timedelta(minutes=shifts.pop()) if len(shifts) == 1 else None


def _per_day(
    rows: QuerySet[Any], days: Sequence[bk.Bucket], tz: ZoneInfo, source: str
) -> list[dict[str, Any]]:
    """Measures grouped per local day, in SQL whenever the zone allows it."""
    if source == Granularity.DAY:
        grouped = rows.values("bucket_start")
        return fold([d.start for d in days], _annotated(grouped), len(days))
    shift = day_shift(days, tz)
    if shift is None:
        grouped = rows.values("bucket_start")
        return fold([d.start for d in days], _annotated(grouped), len(days))
    moved = ExpressionWrapper(
        F("bucket_start") + Value(shift), output_field=DateTimeField()
    )
    per_day = _annotated(rows.annotate(day=TruncDay(moved, tzinfo=tz)).values("day"))
    index = {date.fromisoformat(d.label): i for i, d in enumerate(days)}
    folded = [zero() for _ in days]
    for row in per_day:
        position = index.get(row["day"].astimezone(tz).date())
        if position is not None:
            add_into(folded[position], row)
    return folded


def _annotated(grouped: QuerySet[Any]) -> list[dict[str, Any]]:
    return list(grouped.annotate(**aggregates(), as_of=Max("computed_at")))


def usage_report(*, scope: Scope, flt: UsageFilter, now: datetime) -> UsageReport:
    """The usage page of ``scope`` under ``flt``: a bounded number of queries."""
    items = flt.buckets(now)
    days = flt.days(now)
    if not items:
        return UsageReport(items, [], zero(), {}, days, [], [], [])
    rows = filtered_rows(scope=scope, flt=flt, items=items)
    source = source_granularity(items)
    starts = [b.start for b in items]
    # Latency is per day; in day buckets the series is the same grouping.
    latency = _per_day(rows, days, flt.tz, source_granularity(days))
    if flt.width == "day":
        series = latency
        as_of = rows.aggregate(as_of=Max("computed_at"))["as_of"]
    else:
        hourly = list(
            rows.values("bucket_start").annotate(
                **aggregates(histograms=False), as_of=Max("computed_at")
            )
        )
        series = fold(starts, hourly, len(items))
        as_of = max((row["as_of"] for row in hourly), default=None)
    totals = zero()
    for measures in series:
        add_into(totals, measures)
    if flt.width == "hour":  # the cards' percentiles: the days hold the histograms
        for name in HISTOGRAMS:
            totals[name] = sum(day[name] for day in latency)
    return UsageReport(
        buckets=items,
        series=series,
        totals=totals,
        errors=_errors(rows, starts, len(items)),
        days=days,
        latency=latency,
        by_key=_key_totals(scope, flt, items, now),
        by_route_model=_by_route_model(rows),
        by_account=_by_account(rows) if scope.is_global else [],
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
