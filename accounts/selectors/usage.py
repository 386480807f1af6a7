"""Usage read from rollups only (accounts D5): series, totals, breakdowns and latency.

Which rows are read is ``sources``' (one source granularity for the chart, the cards and
the CSV; the coarsest rows for the breakdown tables), how they fall into buckets is
``bucketing``'s, and what they sum is ``measures``'. All three breakdown tables come from
one read of the range. The number of queries does not grow with the number of keys or
buckets.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.db.models import BigIntegerField, Max, Q, QuerySet, Sum
from django.db.models.functions import Cast

from accounts import buckets as bk
from accounts.models.accounts import Account
from accounts.models.api_keys import ApiKey
from accounts.models.choices import Granularity, Route
from accounts.selectors import Scope
from accounts.selectors.bucketing import Locate, bucketed
from accounts.selectors.measures import HISTOGRAMS, Measures, add_into, aggregates, zero
from accounts.selectors.sources import (
    UsageFilter,
    filtered_rows,
    range_spans,
    rollup_rows,
    source_granularity,
)

# Abandoned records carry no code: the reaper ended them (accounts U10).
ABANDONED_CODE = "abandoned"
UNKNOWN_CODE = "unknown"

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
    for granularity, lo, hi in range_spans(items, now):
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
    for bucket, code, failed, abandoned in grouped.values_list(
        "bucket", "error_code", "failed_sum", "abandoned_sum"
    ):
        index = locate(bucket)
        if index is None:
            continue
        if failed:
            by_code[code or UNKNOWN_CODE][index] += failed
        if abandoned:
            by_code[ABANDONED_CODE][index] += abandoned
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
    # Latency is per day; in day buckets the series is the same grouping. An hour view
    # of whole UTC days reads their daily rows for it, as the day view does (a rolling
    # range starts inside its first day, so it reads the hours it shows).
    if flt.width == "hour" and flt.since is None:
        day_rows = filtered_rows(scope=scope, flt=flt, items=days)
        day_source = source_granularity(days)
    else:
        day_rows, day_source = rows, source
    latency, as_of = _series(
        day_rows, source=day_source, tz=flt.tz, width="day", items=days, histograms=True
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
