"""UsageRollup recomputation (accounts §7): idempotent upserts over a window.

Hourly rows aggregate UsageRecord by the hour of ``started_at``; daily rows aggregate the
hourly rows. A run replaces every row of its window in one transaction: it upserts what it
computed and deletes what it did not, so running twice, or after a late finalization, gives
the same rows as a fresh ``GROUP BY`` (G4–G6).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import (
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Max,
    Q,
    QuerySet,
    Sum,
)
from django.db.models.functions import Coalesce, TruncDay, TruncHour
from django.utils import timezone

from accounts.models import Granularity, UsageRecord, UsageRollup, UsageStatus

logger = logging.getLogger(__name__)

KEY_FIELDS = ("granularity", "bucket_start", "account", "api_key", "endpoint", "model")
GROUP_FIELDS = ("account_id", "api_key_id", "endpoint", "model")
SUM_FIELDS = (
    "requests",
    "completed",
    "cancelled",
    "failed",
    "abandoned",
    "tts_chars_in",
    "tts_audio_out_ms",
    "tts_duration_ms",
    "ttfb_ms_sum",
    "ttfb_count",
    "asr_audio_in_ms",
    "asr_chars_out",
    "asr_items",
    "asr_latency_ms_sum",
)
MAX_FIELDS = ("ttfb_ms_max", "asr_latency_ms_max")
MEASURES = (*SUM_FIELDS, *MAX_FIELDS)
BUCKET = {Granularity.HOUR: timedelta(hours=1), Granularity.DAY: timedelta(days=1)}
MILLISECOND = timedelta(milliseconds=1)


def floor_bucket(moment: datetime, granularity: str) -> datetime:
    """The start of the UTC hour or day that contains ``moment``."""
    moment = moment.astimezone(UTC)
    if granularity == Granularity.HOUR:
        return moment.replace(minute=0, second=0, microsecond=0)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def ceil_bucket(moment: datetime, granularity: str) -> datetime:
    """The first bucket start at or after ``moment``."""
    floor = floor_bucket(moment, granularity)
    return floor if floor == moment else floor + BUCKET[Granularity(granularity)]


def rebuildable_since(granularity: str, now: datetime) -> datetime | None:
    """The first bucket a run may replace, or None when every bucket can be rebuilt.

    Hourly rows are built from usage records, which are purged after
    ``USAGE_RECORD_RETENTION_DAYS`` (U12): an hour that started before the oldest record
    retention keeps whole cannot be rebuilt, and its rows are never replaced or deleted.
    Daily rows are built from hourly rows, which are kept for good.
    """
    if granularity != Granularity.HOUR:
        return None
    horizon = now - timedelta(days=settings.USAGE_RECORD_RETENTION_DAYS)
    return ceil_bucket(horizon, granularity)


def default_window(granularity: str, now: datetime) -> tuple[datetime, datetime]:
    """G4: hours back to ``ROLLUP_LOOKBACK_HOURS``; G5: yesterday and today (UTC)."""
    if granularity == Granularity.HOUR:
        start = floor_bucket(now, granularity)
        return start - timedelta(hours=settings.ROLLUP_LOOKBACK_HOURS), start + BUCKET[
            Granularity.HOUR
        ]
    today = floor_bucket(now, granularity)
    return today - timedelta(days=1), today + timedelta(days=1)


def _from_records(since: datetime, until: datetime) -> QuerySet[Any]:
    duration = ExpressionWrapper(
        F("ended_at") - F("started_at"), output_field=DurationField()
    )
    statuses = {
        status.value: Count("id", filter=Q(status=status))
        for status in (
            UsageStatus.COMPLETED,
            UsageStatus.CANCELLED,
            UsageStatus.FAILED,
            UsageStatus.ABANDONED,
        )
    }
    return (
        UsageRecord.objects.filter(started_at__gte=since, started_at__lt=until)
        .annotate(bucket=TruncHour("started_at", tzinfo=UTC))
        .values("bucket", *GROUP_FIELDS)
        .annotate(
            requests=Count("id"),
            **statuses,
            tts_chars_in=Coalesce(Sum("tts_chars_in"), 0),
            tts_audio_out_ms=Coalesce(Sum("tts_audio_out_ms"), 0),
            tts_duration=Sum(
                duration, filter=Q(endpoint="tts", ended_at__isnull=False)
            ),
            ttfb_ms_sum=Coalesce(Sum("ttfb_ms"), 0),
            ttfb_count=Count("ttfb_ms"),
            ttfb_ms_max=Coalesce(Max("ttfb_ms"), 0),
            asr_audio_in_ms=Coalesce(Sum("asr_audio_in_ms"), 0),
            asr_chars_out=Coalesce(Sum("asr_chars_out"), 0),
            asr_items=Coalesce(Sum("asr_items"), 0),
            asr_latency_ms_sum=Coalesce(Sum("asr_latency_ms_sum"), 0),
            asr_latency_ms_max=Coalesce(Max("asr_latency_ms_max"), 0),
        )
        .order_by()
    )


def _from_hours(since: datetime, until: datetime) -> QuerySet[Any]:
    return (
        UsageRollup.objects.filter(
            granularity=Granularity.HOUR,
            bucket_start__gte=since,
            bucket_start__lt=until,
        )
        .annotate(bucket=TruncDay("bucket_start", tzinfo=UTC))
        .values("bucket", *GROUP_FIELDS)
        .annotate(
            **{name: Sum(name) for name in SUM_FIELDS},
            **{name: Max(name) for name in MAX_FIELDS},
        )
        .order_by()
    )


def _row(granularity: str, aggregate: dict[str, Any], run_at: datetime) -> UsageRollup:
    measures = {name: aggregate.get(name) or 0 for name in MEASURES}
    if "tts_duration" in aggregate:
        duration = aggregate["tts_duration"]
        measures["tts_duration_ms"] = duration // MILLISECOND if duration else 0
    return UsageRollup(
        granularity=granularity,
        bucket_start=aggregate["bucket"],
        account_id=aggregate["account_id"],
        api_key_id=aggregate["api_key_id"],
        endpoint=aggregate["endpoint"],
        model=aggregate["model"],
        computed_at=run_at,
        **measures,
    )


def usage_rollup(
    *,
    granularity: str,
    since: datetime | None = None,
    until: datetime | None = None,
    now: datetime | None = None,
) -> int:
    """Recompute the ``granularity`` rows of a window; return how many rows it holds.

    Without ``since``/``until`` the window is the default of G4/G5. Bounds are widened to
    whole buckets, so no bucket is ever rebuilt from part of its records, and a window that
    reaches back past retention starts at ``rebuildable_since`` instead.
    """
    granularity = Granularity(granularity)
    default_since, default_until = default_window(granularity, now or timezone.now())
    since = floor_bucket(since or default_since, granularity)
    until = ceil_bucket(until or default_until, granularity)
    kept = rebuildable_since(granularity, timezone.now())
    if kept is not None and since < kept:
        logger.warning(
            "rollup %s: buckets before %s kept (their records are past retention)",
            granularity,
            kept.isoformat(),
        )
        since = kept
    if until <= since:
        return 0
    run_at = timezone.now()
    source = (
        _from_records(since, until)
        if granularity == Granularity.HOUR
        else _from_hours(since, until)
    )
    with transaction.atomic():
        rows = [_row(granularity, aggregate, run_at) for aggregate in source]
        UsageRollup.objects.bulk_create(
            rows,
            batch_size=500,
            update_conflicts=True,
            unique_fields=KEY_FIELDS,
            update_fields=[*MEASURES, "computed_at"],
        )
        UsageRollup.objects.filter(
            granularity=granularity, bucket_start__gte=since, bucket_start__lt=until
        ).exclude(computed_at=run_at).delete()
    logger.info(
        "rollup %s %s..%s: %d rows",
        granularity,
        since.isoformat(),
        until.isoformat(),
        len(rows),
    )
    return len(rows)


# G7: one run per granularity at a time, whoever starts it (beat, a range task, a command).
ROLLUP_LOCK_SECONDS = 600


def usage_rollup_single_flight(
    *,
    granularity: str,
    since: datetime | None = None,
    until: datetime | None = None,
) -> int | None:
    """``usage_rollup`` under the granularity's store lock; None when another run has it."""
    from accounts.limits import single_flight

    with single_flight(
        f"rollup_usage:{granularity}", ttl_s=ROLLUP_LOCK_SECONDS
    ) as held:
        if not held:
            return None
        return usage_rollup(granularity=granularity, since=since, until=until)
