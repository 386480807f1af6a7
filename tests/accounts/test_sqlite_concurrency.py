"""SQLite in the embedded default holds under concurrency (issue 9 item 7).

Usage writers, hourly rollups and the reaper run at once in threads, each on its own
connection, as the embedded gateway's metering threads and its in-process scheduler do. With
WAL and immediate write transactions none of them sees ``database is locked`` and no row is
lost; with deferred transactions a read-then-write transaction fails at once whenever another
writer holds the lock, whatever the busy timeout.
"""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections
from django.db.models import Sum
from django.utils import timezone

from accounts.models.quota import QuotaCounter
from accounts.models.rollups import UsageRollup
from accounts.models.usage import UsageRecord
from accounts.services.quota import period_of
from accounts.services.rollups import usage_rollup
from accounts.services.settling import usage_reap_abandoned
from accounts.services.usage import (
    NewRecord,
    RecordEnd,
    UsageCounters,
    usage_checkpoint,
    usage_finish,
    usage_open,
)

WRITERS = 4
RECORDS_PER_WRITER = 25
CHECKPOINTS = 3


@pytest.fixture
def sqlite_only(transactional_db: None) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the embedded default's database is SQLite")


def write_records(make_key: Any, errors: list[str], writer: int) -> None:
    """Open, checkpoint and finish records, as a gateway's metering thread does."""
    api_key, _ = make_key
    try:
        for n in range(RECORDS_PER_WRITER):
            record = NewRecord(
                id=uuid.uuid4(),
                stream_id=uuid.uuid4(),
                request_id=f"w{writer}-{n}",
                account_id=api_key.account_id,
                api_key_id=api_key.id,
                endpoint="tts",
                model="fake/tone",
                started_at=timezone.now(),
                instance="test",
            )
            usage_open(record=record, counters=UsageCounters())
            for chars in range(1, CHECKPOINTS + 1):
                usage_checkpoint(
                    record_id=record.id, counters=UsageCounters(tts_chars_in=chars)
                )
            usage_finish(
                record_id=record.id,
                counters=UsageCounters(tts_chars_in=10, tts_audio_out_ms=500),
                end=RecordEnd(status="completed"),
            )
    except Exception as exc:  # collected: the assertion names every failure
        errors.append(f"writer {writer}: {type(exc).__name__}: {exc}")
    finally:
        connections.close_all()


def keep_running(
    task: Any, stop: threading.Event, errors: list[str], name: str
) -> None:
    """Run ``task`` again and again until ``stop``, as the scheduler does on its own."""
    try:
        while not stop.is_set():
            task()
    except Exception as exc:  # collected: the assertion names every failure
        errors.append(f"{name}: {type(exc).__name__}: {exc}")
    finally:
        connections.close_all()


def test_concurrent_writers_rollups_and_reaper_see_no_lock_error_and_lose_no_row(
    sqlite_only: None, make_key: Any
) -> None:
    key = make_key()
    errors: list[str] = []
    stop = threading.Event()
    background = [
        threading.Thread(
            target=keep_running,
            args=(lambda: usage_rollup(granularity="hour"), stop, errors, "rollup"),
        ),
        threading.Thread(
            target=keep_running,
            args=(
                lambda: usage_reap_abandoned(now=timezone.now(), stale_seconds=3600),
                stop,
                errors,
                "reaper",
            ),
        ),
    ]
    writers = [
        threading.Thread(target=write_records, args=(key, errors, w))
        for w in range(WRITERS)
    ]
    for thread in background + writers:
        thread.start()
    for thread in writers:
        thread.join(timeout=120)
    stop.set()
    for thread in background:
        thread.join(timeout=60)

    assert errors == []
    total = WRITERS * RECORDS_PER_WRITER
    records = UsageRecord.objects.filter(account_id=key[0].account_id)
    assert records.count() == total
    assert records.filter(status="completed").count() == total
    used = QuotaCounter.objects.get(
        account_id=key[0].account_id,
        metric="tts_characters",
        period=period_of(timezone.now()),
    ).used
    assert used == 10 * total  # every record's delta reached its counter (Q3)
    usage_rollup(granularity="hour", since=timezone.now() - timedelta(hours=1))
    rolled = UsageRollup.objects.filter(
        account_id=key[0].account_id, granularity="hour"
    )
    assert rolled.aggregate(n=Sum("requests"))["n"] == total
