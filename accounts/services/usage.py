"""UsageRecord writes (accounts §6): open, checkpoint, finish, reap and purge.

Each write is one transaction that also adds the record's delta to its QuotaCounter rows, so
``QuotaCounter.used`` always equals the sum of the records' counters (Q3). Every update is
conditional on ``status='started'``: replays change nothing and a record is finalized once.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from uuid import UUID

from django.db import transaction
from django.db.models import F
from django.db.models.expressions import Combinable
from django.utils import timezone

from accounts.histogram import normalized
from accounts.models.choices import Endpoint, Route, UsageStatus
from accounts.models.usage import UsageRecord
from accounts.services.quota import METRIC_FIELDS, period_of, quota_add
from accounts.services.rollup_deltas import ROW_FIELDS, rollup_apply
from gateway.link.outputs import TerminalStatus

logger = logging.getLogger(__name__)

TERMINAL_STATUSES = (UsageStatus.COMPLETED, UsageStatus.CANCELLED, UsageStatus.FAILED)


@dataclass(frozen=True)
class UsageCounters:
    """The absolute counters of one record (U4); all integers, milliseconds or characters."""

    tts_chars_in: int = 0
    tts_audio_out_ms: int = 0
    asr_audio_in_ms: int = 0
    asr_chars_out: int = 0
    asr_items: int = 0
    asr_latency_ms_sum: int = 0
    asr_latency_ms_max: int = 0
    # Per-item latency counts in accounts.histogram bins; () until an item completes.
    asr_latency_hist: tuple[int, ...] = ()

    def quota(self) -> dict[str, int]:
        """The amount of each quota metric these counters use (Q1)."""
        return {metric: getattr(self, field) for metric, field in METRIC_FIELDS.items()}

    def as_fields(self) -> dict[str, object]:
        """The counters as UsageRecord field values."""
        fields = asdict(self)
        fields["asr_latency_hist"] = list(self.asr_latency_hist)
        return fields

    @classmethod
    def from_fields(cls, row: dict[str, object]) -> UsageCounters:
        """Counters from UsageRecord values (a stored histogram list becomes a tuple)."""
        values = dict(row)
        values["asr_latency_hist"] = tuple(
            normalized(values.get("asr_latency_hist"))
            if values.get("asr_latency_hist")
            else ()
        )
        return cls(**values)  # type: ignore[arg-type]


COUNTER_FIELDS = tuple(f.name for f in fields(UsageCounters))


@dataclass(frozen=True)
class NewRecord:
    """What a UsageRecord is created with (U1, U3)."""

    id: UUID
    stream_id: UUID
    request_id: str
    account_id: int
    api_key_id: UUID
    endpoint: str
    model: str
    started_at: datetime
    instance: str
    route: str = ""


def default_route(endpoint: str) -> str:
    """The route of a record whose opener did not name one."""
    return Route.ASR_REALTIME if endpoint == Endpoint.ASR else Route.TTS_WS


def this_instance() -> str:
    """``host:pid`` of this process, for ``UsageRecord.instance``."""
    return f"{socket.gethostname()}:{os.getpid()}"[:255]


def _quota_deltas(before: dict[str, int], after: UsageCounters) -> dict[str, int]:
    return {
        metric: getattr(after, field) - before[field]
        for metric, field in METRIC_FIELDS.items()
    }


def _create(record: NewRecord, counters: UsageCounters, now: datetime) -> UsageRecord:
    period = period_of(record.started_at)
    created = UsageRecord.objects.create(
        id=record.id,
        stream_id=record.stream_id,
        request_id=record.request_id[:64],
        account_id=record.account_id,
        api_key_id=record.api_key_id,
        endpoint=record.endpoint,
        route=record.route or default_route(record.endpoint),
        model=record.model[:100],
        status=UsageStatus.STARTED,
        started_at=record.started_at,
        last_checkpoint_at=now,
        period=period,
        instance=record.instance,
        **counters.as_fields(),
    )
    quota_add(
        account_id=record.account_id, period=period, deltas=counters.quota(), now=now
    )
    return created


def _create_once(record: NewRecord, counters: UsageCounters, now: datetime) -> bool:
    """Create the record unless it exists (a replay); inside the caller's transaction."""
    if UsageRecord.objects.filter(pk=record.id).exists():
        return False
    _create(record, counters, now)
    return True


def usage_open(
    *, record: NewRecord, counters: UsageCounters, now: datetime | None = None
) -> bool:
    """Commit the record with ``status=started`` (U2); False if it already exists."""
    now = now or timezone.now()
    with transaction.atomic():
        return _create_once(record, counters, now)


def _update_record(
    record_id: UUID,
    counters: UsageCounters,
    now: datetime,
    *,
    statuses: tuple[str, ...] = (UsageStatus.STARTED,),
    **changes: object,
) -> bool:
    """The conditional UPDATE of every record write (only while its status is one of
    ``statuses``), with its QuotaCounter delta (Q3) and, once it has ended, its rollup
    delta (``rollup_deltas``), in the caller's transaction."""
    before = (
        UsageRecord.objects.select_for_update()
        .filter(pk=record_id, status__in=statuses)
        .values("period", *ROW_FIELDS)
        .first()
    )
    if before is None:
        return False
    updated = UsageRecord.objects.filter(pk=record_id, status__in=statuses).update(
        **counters.as_fields(), **changes
    )
    if not updated:
        return False
    quota_add(
        account_id=before["account_id"],
        period=before["period"],
        deltas=_quota_deltas(before, counters),
        now=now,
    )
    plain = {k: v for k, v in changes.items() if not isinstance(v, Combinable)}
    after = {**before, **counters.as_fields(), **plain}
    rollup_apply(before=before, after=after, now=now)
    return True


def usage_checkpoint(
    *, record_id: UUID, counters: UsageCounters, now: datetime | None = None
) -> bool:
    """Write the absolute counters of a started record (U5); False if it is no longer
    started (U6)."""
    now = now or timezone.now()
    with transaction.atomic():
        return _update_record(
            record_id,
            counters,
            now,
            checkpoint_seq=F("checkpoint_seq") + 1,
            last_checkpoint_at=now,
        )


@dataclass(frozen=True)
class RecordEnd:
    """How a record ends (U8, U9): its terminal status and what the stream reported."""

    status: TerminalStatus
    error_code: str = ""
    close_code: int | None = None
    ttfb_ms: int | None = None
    rtf: float | None = None


def usage_finish(
    *,
    record_id: UUID,
    counters: UsageCounters,
    end: RecordEnd,
    now: datetime | None = None,
) -> bool:
    """Finalize a started record once (U8); a second call returns False."""
    now = now or timezone.now()
    with transaction.atomic():
        return _end_record(record_id, counters, end, now)


def _end_record(
    record_id: UUID,
    counters: UsageCounters,
    end: RecordEnd,
    ended_at: datetime,
    *,
    statuses: tuple[str, ...] = (UsageStatus.STARTED,),
) -> bool:
    assert end.status in TERMINAL_STATUSES, end.status
    return _update_record(
        record_id,
        counters,
        ended_at,
        statuses=statuses,
        status=end.status,
        ended_at=ended_at,
        last_checkpoint_at=ended_at,
        error_code=end.error_code[:40],
        close_code=end.close_code,
        ttfb_ms=end.ttfb_ms,
        rtf=end.rtf,
    )


def usage_land(
    *,
    record: NewRecord,
    counters: UsageCounters,
    end: RecordEnd,
    ended_at: datetime,
) -> bool:
    """Write how a record ended, whatever happened to its row meanwhile (a journaled
    finalization, accounts.journal): a record never opened is created ended, and one the
    reaper marked ``abandoned`` from older counters is corrected. False when it had
    already ended another way (a replay)."""
    with transaction.atomic():
        _create_once(record, UsageCounters(), ended_at)
        return _end_record(
            record.id,
            counters,
            end,
            ended_at,
            statuses=(UsageStatus.STARTED, UsageStatus.ABANDONED),
        )


def usage_abandon(
    *, record_id: UUID, counters: UsageCounters, ended_at: datetime, now: datetime
) -> bool:
    """Mark a started record ``abandoned`` with ``counters`` (U10); False if it ended."""
    return _update_record(
        record_id, counters, now, status=UsageStatus.ABANDONED, ended_at=ended_at
    )


def usage_counters(*, record_id: UUID) -> UsageCounters | None:
    """The counters the database holds for a record, or None when there is none."""
    row = UsageRecord.objects.filter(pk=record_id).values(*COUNTER_FIELDS).first()
    return None if row is None else UsageCounters.from_fields(row)


def usage_purge(*, before: datetime) -> int:
    """Delete finished records that started before ``before`` (U12)."""
    deleted, _ = (
        UsageRecord.objects.filter(started_at__lt=before)
        .exclude(status=UsageStatus.STARTED)
        .delete()
    )
    return deleted
