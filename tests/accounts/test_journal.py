"""Nothing lost (issue 30 item 5, docs/accounting.md): the usage journal, the finalization
retried until it lands, and the reaper settling from the last known counters.

The PostgreSQL and Redis outages themselves are in tests/e2e/test_ledger_faults.py; here the
database error of one write is injected, so the retry path runs in milliseconds.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.db import database_sync_to_async
from django.db import OperationalError
from django.utils import timezone

from accounts import landing
from accounts.admission import admit
from accounts.journal import FileJournal, JournalEntry, RedisJournal, get_journal
from accounts.metering import UsageMeter
from accounts.models.rollups import UsageRollup
from accounts.models.usage import UsageRecord
from accounts.services.settling import usage_journal_settle, usage_reap_abandoned
from accounts.services.usage import NewRecord, RecordEnd, UsageCounters

from .conftest import bearer_scope
from .test_metering import assert_q3_invariant

pytestmark = pytest.mark.django_db(transaction=True)


def entry(end: RecordEnd | None = None, **counts: int) -> JournalEntry:
    record = NewRecord(
        id=uuid.uuid4(),
        stream_id=uuid.uuid4(),
        request_id="req-1",
        account_id=1,
        api_key_id=uuid.uuid4(),
        endpoint="asr",
        model="m",
        started_at=timezone.now(),
        instance="h:1",
        route="asr_realtime",
    )
    return JournalEntry(record, UsageCounters(**counts), timezone.now(), end)


def contract(journal: Any) -> None:
    live, final = entry(asr_audio_in_ms=5), entry(RecordEnd("failed", "x", 1011))
    journal.put(live)
    journal.put(final)
    assert journal.get(live.record.id, "live") == live
    assert journal.get(final.record.id, "final") == final
    assert journal.get(live.record.id, "final") is None
    assert [e.record.id for e in journal.entries("final")] == [final.record.id]
    journal.drop(live.record.id)
    journal.drop(final.record.id, "final")
    assert journal.entries("live") == journal.entries("final") == []


@pytest.mark.django_db(transaction=False)
def test_file_journal_keeps_whole_entries(tmp_path: Path) -> None:
    contract(FileJournal(tmp_path))


@pytest.mark.redis
@pytest.mark.django_db(transaction=False)
def test_redis_journal_keeps_whole_entries(redis_url: str) -> None:
    import redis

    contract(RedisJournal(redis.Redis.from_url(redis_url), f"t{uuid.uuid4().hex[:8]}:"))


async def opened_asr_meter(keyed: Any) -> tuple[Any, UsageMeter]:
    api_key, raw = await keyed()
    admission = await admit(bearer_scope(raw), endpoint="asr")
    meter = UsageMeter.for_admission(
        admission, endpoint="asr", request_id="sess_j", model="m"
    )
    await meter.open()
    return admission, meter


async def test_a_finalization_that_meets_a_database_error_lands_later(
    keyed: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    admission, meter = await opened_asr_meter(keyed)
    meter.add(asr_audio_in_ms=4_000)
    real, failures = landing.land_entry, [2]

    def flaky(entry: JournalEntry) -> bool:
        if failures[0]:
            failures[0] -= 1
            raise OperationalError("server closed the connection unexpectedly")
        return real(entry)

    monkeypatch.setattr(landing, "land_entry", flaky)
    monkeypatch.setattr(landing, "RETRY_FIRST_S", 0.05)

    async def view() -> bool:  # as a REST view: a sync middleware's thread runs it
        return await meter.finish(status="completed", close_code=1000)

    # The retry outlives that thread's executor, which quits with the request.
    assert await sync_to_async(async_to_sync(view), thread_sensitive=False)() is False
    # Meanwhile the end is in the journal, where any process's reaper would find it.
    pending = get_journal().get(meter.record_id, "final")
    assert pending is not None and pending.counters.asr_audio_in_ms == 4_000
    for _ in range(100):
        record = await UsageRecord.objects.aget(pk=meter.record_id)
        if record.status != "started":
            break
        await asyncio.sleep(0.05)
    assert (record.status, record.close_code, record.asr_audio_in_ms) == (
        "completed",
        1000,
        4_000,
    )
    for _ in range(100):
        if get_journal().get(meter.record_id, "final") is None:
            break
        await asyncio.sleep(0.02)
    assert get_journal().get(meter.record_id, "final") is None
    await assert_q3_invariant(admission.principal.account_id)
    await admission.release()


async def test_a_journaled_end_lands_from_another_process(keyed: Any) -> None:
    admission, meter = await opened_asr_meter(keyed)
    record = await UsageRecord.objects.aget(pk=meter.record_id)
    final = JournalEntry(
        NewRecord(
            id=record.id,
            stream_id=record.stream_id,
            request_id=record.request_id,
            account_id=record.account_id,
            api_key_id=record.api_key_id,
            endpoint="asr",
            model="m",
            started_at=record.started_at,
            instance="dead:1",
            route="asr_realtime",
        ),
        UsageCounters(asr_audio_in_ms=6_000),
        timezone.now(),
        RecordEnd("failed", "usage_unavailable", 1011),
    )
    journal = get_journal()
    journal.put(final)  # what a gateway wrote before it died
    landed = await database_sync_to_async(usage_journal_settle)(
        journal=journal, now=timezone.now(), stale_seconds=15
    )
    assert landed == 1 and journal.entries("final") == []
    record = await UsageRecord.objects.aget(pk=meter.record_id)
    assert (record.status, record.close_code, record.asr_audio_in_ms) == (
        "failed",
        1011,
        6_000,
    )
    rollup = await UsageRollup.objects.aget(
        granularity="hour", api_key_id=record.api_key_id
    )
    assert (rollup.requests, rollup.failed, rollup.asr_audio_in_ms) == (1, 1, 6_000)
    await assert_q3_invariant(record.account_id)
    await admission.release()


async def test_the_reaper_settles_from_the_last_counters_noted(
    keyed: Any, settings: Any
) -> None:
    admission, meter = await opened_asr_meter(keyed)
    meter.add(asr_audio_in_ms=2_000)
    await meter.checkpoint()
    meter.add(asr_audio_in_ms=3_500)  # served after the checkpoint, noted by the tick
    settings.USAGE_CHECKPOINT_SECONDS = 3600
    await asyncio.sleep(0.3)
    assert await meter.tick() is None
    journal = get_journal()
    noted = journal.get(meter.record_id, "live")
    assert noted is not None and noted.counters.asr_audio_in_ms == 5_500
    # While the gateway still notes it, a stale checkpoint alone does not reap it.
    soon = noted.noted_at + timedelta(seconds=1)
    reap = database_sync_to_async(usage_reap_abandoned)
    assert await reap(now=soon, stale_seconds=1.1, journal=journal) == 0
    later = timezone.now() + timedelta(minutes=1)
    assert await reap(now=later, stale_seconds=15, journal=journal) == 1
    record = await UsageRecord.objects.aget(pk=meter.record_id)
    assert (record.status, record.asr_audio_in_ms) == ("abandoned", 5_500)
    assert record.ended_at == noted.noted_at
    assert journal.get(meter.record_id, "live") is None
    await assert_q3_invariant(record.account_id)
    await admission.release()
