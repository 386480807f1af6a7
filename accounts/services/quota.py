"""Quota counters (accounts §5.4): the database authority and its limits-store mirror.

``QuotaCounter.used`` changes only inside the transaction that writes a UsageRecord, by that
record's delta (Q3), or that writes an operator's QuotaAdjustment, by its amount. The mirror in the limits store is seeded from it (Q5), pre-debited by
reservations (Q7, Q8) and reconciled by the beat task to the database plus the live
reservations (Q11).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Sum
from django.utils import timezone

from accounts.limits import get_limiter
from accounts.models.accounts import Account
from accounts.models.choices import QuotaMetric, stored_units
from accounts.models.quota import QuotaAdjustment, QuotaCounter
from accounts.models.usage import UsageRecord

logger = logging.getLogger(__name__)

# The UsageRecord counter behind each quota metric (Q1).
METRIC_FIELDS: dict[str, str] = {
    QuotaMetric.TTS_CHARACTERS: "tts_chars_in",
    QuotaMetric.ASR_AUDIO_MS: "asr_audio_in_ms",
}


def period_of(moment: datetime) -> str:
    """The UTC month ``YYYY-MM`` that contains ``moment`` (Q4)."""
    return moment.astimezone(UTC).strftime("%Y-%m")


def previous_period(period: str) -> str:
    """The month before ``period``."""
    year, month = (int(part) for part in period.split("-"))
    return f"{year - 1}-12" if month == 1 else f"{year}-{month - 1:02d}"


def period_start(period: str) -> datetime:
    """The first instant of ``period`` (UTC)."""
    year, month = (int(part) for part in period.split("-"))
    return datetime(year, month, 1, tzinfo=UTC)


def quota_add(
    *, account_id: int, period: str, deltas: Mapping[str, int], now: datetime
) -> None:
    """Add per-metric deltas to the counters; call inside the record's transaction (Q3)."""
    for metric, delta in deltas.items():
        if not delta:
            continue
        counter, created = QuotaCounter.objects.get_or_create(
            account_id=account_id,
            period=period,
            metric=metric,
            defaults={"used": delta, "updated_at": now},
        )
        if not created:
            QuotaCounter.objects.filter(pk=counter.pk).update(
                used=F("used") + delta, updated_at=now
            )


def quota_used(*, account_id: int, metric: str, period: str) -> int:
    """The authoritative use of one metric in one period (0 when nothing is counted)."""
    counter = QuotaCounter.objects.filter(
        account_id=account_id, metric=metric, period=period
    ).first()
    return counter.used if counter is not None else 0


def quota_recount(*, periods: Iterable[str]) -> int:
    """Recompute ``used`` from the records of ``periods`` and operators' adjustments
    (QuotaAdjustment); return how many rows changed.

    Nothing changes while the Q3 invariant holds. The counter rows are locked first, so a
    concurrent checkpoint either is in the sum and the counter, or in neither yet.
    """
    changed = 0
    now = timezone.now()
    for period in periods:
        with transaction.atomic():
            counters = {
                (c.account_id, c.metric): c
                for c in QuotaCounter.objects.select_for_update().filter(period=period)
            }
            sums = (
                UsageRecord.objects.filter(period=period)
                .values("account_id")
                .annotate(
                    **{metric: Sum(field) for metric, field in METRIC_FIELDS.items()}
                )
                .values_list("account_id", *METRIC_FIELDS)
            )
            totals: dict[tuple[int, str], int] = {}
            for account_id, *used_by_metric in sums:
                for metric, used in zip(METRIC_FIELDS, used_by_metric, strict=True):
                    totals[(account_id, metric)] = used or 0
            for account_id, metric, amount in _adjustments(period):
                key = (account_id, metric)
                totals[key] = totals.get(key, 0) + stored_units(metric, amount)
            for key in counters.keys() | totals.keys():
                used = totals.get(key, 0)
                counter = counters.get(key)
                if counter is None and used:
                    QuotaCounter.objects.create(
                        account_id=key[0],
                        period=period,
                        metric=key[1],
                        used=used,
                        updated_at=now,
                    )
                    changed += 1
                elif counter is not None and counter.used != used:
                    logger.warning(
                        "quota %s %s %s: counter %d, records %d",
                        key[0],
                        period,
                        key[1],
                        counter.used,
                        used,
                    )
                    QuotaCounter.objects.filter(pk=counter.pk).update(
                        used=used, updated_at=now
                    )
                    changed += 1
    return changed


def _adjustments(period: str) -> list[tuple[int, str, int]]:
    """Operators' corrections of ``period`` summed per account and metric."""
    return list(
        QuotaAdjustment.objects.filter(period=period)
        .values("account_id", "metric")
        .annotate(total=Sum("amount"))
        .values_list("account_id", "metric", "total")
    )


# Q11: a settlement between reading the generation and setting the mirror means try again.
RECONCILE_ATTEMPTS = 3


def quota_reconcile(*, periods: Iterable[str]) -> int:
    """Set each existing mirror of ``periods`` to the database value plus the live
    reservations (Q11); return how many were set.

    Each account's settlement generation is read just before its counters, and the store
    sets a mirror only if no settlement moved quota from a reservation into the database
    in between. Reservations of streams whose lease is gone (ended or crashed without
    settling) are dropped, so what they held goes back to the account.
    """
    periods = list(periods)
    return sum(
        _reconcile_account(account_id, periods)
        for account_id in Account.objects.values_list("pk", flat=True)
    )


def _reconcile_account(account_id: int, periods: list[str]) -> int:
    limiter = get_limiter()
    pending = [(metric, period) for period in periods for metric in METRIC_FIELDS]
    reconciled = 0
    for _ in range(RECONCILE_ATTEMPTS):
        generation = limiter.quota_generation(account_id)
        used = {
            (c.metric, c.period): c.used
            for c in QuotaCounter.objects.filter(
                account_id=account_id, period__in=periods
            )
        }
        changed = []
        for metric, period in pending:
            result = limiter.reconcile_quota(
                account_id=account_id,
                metric=metric,
                period=period,
                used=used.get((metric, period), 0),
                generation=generation,
            )
            if result is False:
                changed.append((metric, period))
            reconciled += bool(result)
        if not changed:
            break
        pending = changed
    return reconciled


def current_periods(now: datetime | None = None) -> list[str]:
    """This month and the one before: a record counts in the month it started (Q4)."""
    current = period_of(now or timezone.now())
    return [current, previous_period(current)]


def retention_start(now: datetime | None = None) -> datetime:
    """The oldest ``started_at`` that retention keeps at ``now`` (default: now), after
    ``USAGE_RECORD_RETENTION_DAYS`` (U12)."""
    days = settings.USAGE_RECORD_RETENTION_DAYS
    return (now or timezone.now()) - timedelta(days=days)
