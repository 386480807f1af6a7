"""Reconciliation (issue 30 item 6): records, quota counters and rollups must agree.

``usage_drift`` compares, for a range, four independent sums and lists every difference:

* ``quota``: each QuotaCounter against the sum of its period's records (Q3), for the
  periods the range touches whose records are all still kept;
* ``hourly``: each hourly key row against the aggregate of its hour's ended records;
* ``daily``: each daily key row against the sum of its day's hourly rows;
* ``account``: each account row (hour and day) against the sum of its key rows;

and ``stuck`` records still ``started`` long after the reaper should have settled them.
``usage_drift_fix`` runs the reaper, rebuilds the range's rollups and recounts its quota
periods.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet, Sum

from accounts.journal import get_journal
from accounts.models.choices import Granularity, UsageStatus
from accounts.models.quota import QuotaCounter
from accounts.models.rollups import AccountRollup, UsageRollup
from accounts.models.usage import UsageRecord
from accounts.services.quota import (
    METRIC_FIELDS,
    period_of,
    period_start,
    quota_recount,
    retention_start,
)
from accounts.services.rollups import (
    GROUP_FIELDS,
    SUM_FIELDS,
    ceil_bucket,
    floor_bucket,
    hours_by_day,
    keys_by_account,
    rebuildable_since,
    records_by_hour,
    usage_rollup_single_flight,
)
from accounts.services.settling import usage_reap_abandoned

# A started record not settled this long after its last checkpoint is stuck: the reaper
# (every 30 s) settles records USAGE_STALE_SECONDS after their stream stops reporting.
STUCK_GRACE_S = 120


@dataclass(frozen=True)
class Drift:
    """One disagreement: what kind, which row, and the two values that differ."""

    kind: str
    row: str
    field: str
    stored: int
    expected: int

    def __str__(self) -> str:
        return (
            f"{self.kind} {self.row}: {self.field} stored {self.stored}, "
            f"expected {self.expected} ({self.stored - self.expected:+d})"
        )


def _sums(
    rows: QuerySet[Any], group: tuple[str, ...]
) -> dict[tuple[Any, ...], dict[str, int]]:
    return {
        tuple(row[name] for name in group): {f: int(row[f] or 0) for f in SUM_FIELDS}
        for row in rows
    }


def _compare(
    kind: str,
    stored: dict[tuple[Any, ...], dict[str, int]],
    expected: dict[tuple[Any, ...], dict[str, int]],
) -> list[Drift]:
    drift = []
    zero = dict.fromkeys(SUM_FIELDS, 0)
    for key in sorted(stored.keys() | expected.keys(), key=str):
        have, want = stored.get(key, zero), expected.get(key, zero)
        label = " ".join(str(part) for part in key)
        drift += [
            Drift(kind, label, f, have[f], want[f])
            for f in SUM_FIELDS
            if have[f] != want[f]
        ]
    return drift


def _stored(
    table: type[UsageRollup] | type[AccountRollup],
    granularity: str,
    since: datetime,
    until: datetime,
    group: tuple[str, ...],
) -> dict[tuple[Any, ...], dict[str, int]]:
    rows = table.objects.filter(
        granularity=granularity, bucket_start__gte=since, bucket_start__lt=until
    ).values("bucket_start", *group, *SUM_FIELDS)
    renamed = ({**row, "bucket": row["bucket_start"]} for row in rows)
    return {
        tuple(row[name] for name in ("bucket", *group)): {
            f: int(row[f]) for f in SUM_FIELDS
        }
        for row in renamed
    }


def _rollup_drift(since: datetime, until: datetime) -> list[Drift]:
    hours = floor_bucket(since, Granularity.HOUR), ceil_bucket(until, Granularity.HOUR)
    kept = rebuildable_since(Granularity.HOUR, until)
    if kept is not None and hours[0] < kept:
        hours = (kept, hours[1])
    days = floor_bucket(since, Granularity.DAY), ceil_bucket(until, Granularity.DAY)
    group = ("bucket", *GROUP_FIELDS)
    account_group = tuple(f for f in group if f != "api_key_id")
    keys = tuple(f for f in GROUP_FIELDS)
    account_keys = tuple(f for f in keys if f != "api_key_id")
    drift = _compare(
        "hourly",
        _stored(UsageRollup, Granularity.HOUR, *hours, keys),
        _sums(records_by_hour(*hours), group),
    )
    drift += _compare(
        "daily",
        _stored(UsageRollup, Granularity.DAY, *days, keys),
        _sums(hours_by_day(*days), group),
    )
    for granularity, window in ((Granularity.HOUR, hours), (Granularity.DAY, days)):
        drift += _compare(
            "account",
            _stored(AccountRollup, granularity, *window, account_keys),
            _sums(keys_by_account(granularity, *window), account_group),
        )
    return drift


def audit_periods(since: datetime, until: datetime, now: datetime) -> list[str]:
    """The quota periods the range touches whose records are all still kept."""
    horizon = retention_start(now)
    periods, moment = [], since
    while moment < until:
        period = period_of(moment)
        if period_start(period) >= horizon and period not in periods:
            periods.append(period)
        moment = (period_start(period) + timedelta(days=32)).replace(day=1)
    return periods


def _quota_drift(periods: list[str]) -> list[Drift]:
    drift = []
    for period in periods:
        stored = {
            (c.account_id, c.metric): c.used
            for c in QuotaCounter.objects.filter(period=period)
        }
        sums = (
            UsageRecord.objects.filter(period=period)
            .values("account_id")
            .annotate(**{m: Sum(f) for m, f in METRIC_FIELDS.items()})
        )
        expected = {
            (row["account_id"], metric): int(row[metric] or 0)
            for row in sums
            for metric in METRIC_FIELDS
        }
        for key in sorted(stored.keys() | expected.keys(), key=str):
            have, want = stored.get(key, 0), expected.get(key, 0)
            if have != want:
                row = f"{period} account={key[0]}"
                drift.append(Drift("quota", row, key[1], have, want))
    return drift


def _stuck(now: datetime) -> list[Drift]:
    cutoff = now - timedelta(seconds=settings.USAGE_STALE_SECONDS + STUCK_GRACE_S)
    count = UsageRecord.objects.filter(
        status=UsageStatus.STARTED, last_checkpoint_at__lt=cutoff
    ).count()
    return [Drift("stuck", "records started", "count", count, 0)] if count else []


def usage_drift(*, since: datetime, until: datetime, now: datetime) -> list[Drift]:
    """Every disagreement of the range (empty when records, counters and rollups agree)."""
    periods = audit_periods(since, until, now)
    return _quota_drift(periods) + _rollup_drift(since, until) + _stuck(now)


def usage_drift_fix(*, since: datetime, until: datetime, now: datetime) -> None:
    """Settle stuck records (the reaper, with the journal), then rebuild the range's
    rollups from the records and recount its quota periods."""
    usage_reap_abandoned(
        now=now, stale_seconds=settings.USAGE_STALE_SECONDS, journal=get_journal()
    )
    for granularity in (Granularity.HOUR, Granularity.DAY):
        usage_rollup_single_flight(granularity=granularity, since=since, until=until)
    quota_recount(periods=audit_periods(since, until, now))
