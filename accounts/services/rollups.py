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
from django.db import connection, transaction
from django.db.models import (
    BigIntegerField,
    CharField,
    Count,
    DateTimeField,
    F,
    Func,
    Max,
    Q,
    QuerySet,
    Sum,
    Value,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce, Floor, TruncDay, TruncHour
from django.utils import timezone

from accounts.histogram import ASR_LATENCY_FIELDS, TTFB_FIELDS, bin_range
from accounts.models.choices import Granularity, UsageStatus
from accounts.models.rollups import (
    ACCOUNT_ROLLUP_KEY,
    OUTCOME_COUNTS,
    ROLLUP_KEY,
    AccountRollup,
    RollupMeasures,
    UsageRollup,
)
from accounts.models.usage import UsageRecord
from accounts.services.quota import retention_start

logger = logging.getLogger(__name__)

GROUP_FIELDS = ("account_id", "api_key_id", "endpoint", "route", "model", "error_code")
SUM_FIELDS = (
    *OUTCOME_COUNTS,
    "tts_chars_in",
    "tts_audio_out_ms",
    "tts_duration_ms",
    "ttfb_ms_sum",
    "ttfb_count",
    "asr_audio_in_ms",
    "asr_chars_out",
    "asr_items",
    "asr_latency_ms_sum",
    *TTFB_FIELDS,
    *ASR_LATENCY_FIELDS,
)
MAX_FIELDS = ("ttfb_ms_max", "asr_latency_ms_max")
MEASURES = (*SUM_FIELDS, *MAX_FIELDS)
BUCKET = {Granularity.HOUR: timedelta(hours=1), Granularity.DAY: timedelta(days=1)}
# PostgreSQL advisory lock between rollup writers (an arbitrary constant of our own).
ROLLUP_LOCK_ID = 30_0530


def rollup_lock(*, exclusive: bool) -> None:
    """Inside a transaction: the recompute holds this exclusively, each write that adds a
    record to the rollups (``rollup_deltas``) shared, so no recompute overwrites an
    addition it did not see. SQLite has one writer at a time already."""
    if connection.vendor != "postgresql":
        return
    function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s)", [ROLLUP_LOCK_ID])


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
    return ceil_bucket(retention_start(now), granularity)


def default_window(granularity: str, now: datetime) -> tuple[datetime, datetime]:
    """G4: hours back to ``ROLLUP_LOOKBACK_HOURS``; G5: yesterday and today (UTC)."""
    if granularity == Granularity.HOUR:
        start = floor_bucket(now, granularity)
        return start - timedelta(hours=settings.ROLLUP_LOOKBACK_HOURS), start + BUCKET[
            Granularity.HOUR
        ]
    today = floor_bucket(now, granularity)
    return today - timedelta(days=1), today + timedelta(days=1)


def _ttfb_bins() -> dict[str, Count]:
    """One filtered COUNT per TTFB bin: a record's single TTFB lands in one of them."""
    bins = {}
    for index, name in enumerate(TTFB_FIELDS):
        lower, upper = bin_range(index)
        within = Q(ttfb_ms__gte=lower)
        if upper is not None:
            within &= Q(ttfb_ms__lt=upper)
        bins[name] = Count("id", filter=within)
    return bins


class Microseconds(Func):
    """``end - start`` of two datetime columns in whole microseconds (a bigint)."""

    output_field = BigIntegerField()

    def as_postgresql(
        self, compiler: Any, connection: Any, **extra: Any
    ) -> tuple[str, Any]:
        return self.as_sql(
            compiler,
            connection,
            template="(EXTRACT(EPOCH FROM (%(expressions)s)) * 1000000)::bigint",
            arg_joiner=" - ",
            **extra,
        )

    def as_sqlite(
        self, compiler: Any, connection: Any, **extra: Any
    ) -> tuple[str, Any]:
        # Django registers django_timestamp_diff on every SQLite connection.
        return self.as_sql(
            compiler,
            connection,
            template="django_timestamp_diff(%(expressions)s)",
            arg_joiner=", ",
            **extra,
        )


def _asr_bins() -> dict[str, Coalesce]:
    """The records' per-item ASR histograms summed bin by bin, in SQL (JSON array items)."""
    return {
        name: Coalesce(
            # A record without items stores [], whose elements read as NULL.
            Sum(Cast(KT(f"asr_latency_hist__{index}"), BigIntegerField())),
            0,
        )
        for index, name in enumerate(ASR_LATENCY_FIELDS)
    }


def records_by_hour(since: datetime, until: datetime) -> QuerySet[Any]:
    """The hourly sums of the window's ended records (a record counts once it ends,
    docs/accounting.md), each weighted by the requests it stands for."""
    # Floored per record, as ``rollup_deltas`` adds them.
    tts_duration_ms = Sum(
        Cast(
            Floor(Microseconds("ended_at", "started_at") / Value(1000)),
            BigIntegerField(),
        ),
        filter=Q(endpoint="tts", ended_at__isnull=False),
    )
    statuses = {
        status.value: Coalesce(Sum("weight", filter=Q(status=status)), 0)
        for status in (
            UsageStatus.COMPLETED,
            UsageStatus.CANCELLED,
            UsageStatus.FAILED,
            UsageStatus.ABANDONED,
        )
    }
    return (
        UsageRecord.objects.filter(started_at__gte=since, started_at__lt=until)
        .exclude(status=UsageStatus.STARTED)
        .annotate(bucket=TruncHour("started_at", tzinfo=UTC), weight=F("requests"))
        .values("bucket", *GROUP_FIELDS)
        .annotate(
            requests=Coalesce(Sum("weight"), 0),
            **statuses,
            tts_chars_in=Coalesce(Sum("tts_chars_in"), 0),
            tts_audio_out_ms=Coalesce(Sum("tts_audio_out_ms"), 0),
            tts_duration_ms=Coalesce(tts_duration_ms, 0),
            ttfb_ms_sum=Coalesce(Sum("ttfb_ms"), 0),
            ttfb_count=Count("ttfb_ms"),
            ttfb_ms_max=Coalesce(Max("ttfb_ms"), 0),
            asr_audio_in_ms=Coalesce(Sum("asr_audio_in_ms"), 0),
            asr_chars_out=Coalesce(Sum("asr_chars_out"), 0),
            asr_items=Coalesce(Sum("asr_items"), 0),
            asr_latency_ms_sum=Coalesce(Sum("asr_latency_ms_sum"), 0),
            asr_latency_ms_max=Coalesce(Max("asr_latency_ms_max"), 0),
            **_ttfb_bins(),
            **_asr_bins(),
        )
        .order_by()
    )


def hours_by_day(since: datetime, until: datetime) -> QuerySet[Any]:
    """The daily sums of the window's hourly key rows."""
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


def _upsert(
    source: QuerySet[Any],
    granularity: str,
    run_at: datetime,
    target: type[RollupMeasures] = UsageRollup,
) -> int:
    """``INSERT … SELECT … ON CONFLICT DO UPDATE``: the aggregate never leaves the database.

    Rows that already exist (same key) get the new measures; the query is the ORM's own
    SQL for ``source``, so it works on SQLite (≥ 3.24) and PostgreSQL alike.
    """
    stamped = source.annotate(
        granularity_value=Value(granularity, output_field=CharField()),
        computed_at_value=Value(run_at, output_field=DateTimeField()),
    )
    compiler = stamped.query.get_compiler(connection=connection)
    select_sql, params = compiler.as_sql()
    names = {"bucket": "bucket_start", "granularity_value": "granularity"}
    names["computed_at_value"] = "computed_at"
    meta = target._meta
    columns = [
        str(meta.get_field(names.get(alias, alias).removesuffix("_id")).column)  # type: ignore[union-attr]
        for _, _, alias in compiler.select
    ]
    key_fields = ROLLUP_KEY if target is UsageRollup else ACCOUNT_ROLLUP_KEY
    keys = [str(meta.get_field(f).column) for f in key_fields]  # type: ignore[union-attr]
    update = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in keys)
    sql = (
        f"INSERT INTO {meta.db_table} ({', '.join(columns)}) {select_sql} "
        f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {update}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return max(cursor.rowcount, 0)


ACCOUNT_GROUP_FIELDS = tuple(f for f in GROUP_FIELDS if f != "api_key_id")


def keys_by_account(
    granularity: str, since: datetime, until: datetime
) -> QuerySet[Any]:
    """The window's key rows summed over keys, for AccountRollup."""
    return (
        UsageRollup.objects.filter(
            granularity=granularity, bucket_start__gte=since, bucket_start__lt=until
        )
        .annotate(bucket=F("bucket_start"))
        .values("bucket", *ACCOUNT_GROUP_FIELDS)
        .annotate(
            **{name: Sum(name) for name in SUM_FIELDS},
            **{name: Max(name) for name in MAX_FIELDS},
        )
        .order_by()
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
    hourly = granularity == Granularity.HOUR
    source = records_by_hour(since, until) if hourly else hours_by_day(since, until)
    window = {
        "granularity": granularity,
        "bucket_start__gte": since,
        "bucket_start__lt": until,
    }
    with transaction.atomic():
        rollup_lock(exclusive=True)
        rows = _upsert(source, granularity, run_at)
        UsageRollup.objects.filter(**window).exclude(computed_at=run_at).delete()
        # The account totals follow the key rows in the same transaction.
        totals = keys_by_account(granularity, since, until)
        _upsert(totals, granularity, run_at, AccountRollup)
        AccountRollup.objects.filter(**window).exclude(computed_at=run_at).delete()
    logger.info(
        "rollup %s %s..%s: %d rows",
        granularity,
        since.isoformat(),
        until.isoformat(),
        rows,
    )
    return rows


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
