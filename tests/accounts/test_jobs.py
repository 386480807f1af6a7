"""Periodic jobs and commands (accounts G1–G7, U10, U12, Q3, Q11, T1–T4, §12 checks)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts import checks, tasks
from accounts.limits import get_limiter
from accounts.models.quota import QuotaCounter
from accounts.models.rollups import UsageRollup
from accounts.models.usage import UsageRecord
from accounts.scheduler import seconds_until_next, start_embedded_scheduler
from accounts.services.quota import period_of, period_start, quota_reconcile
from accounts.services.rollups import usage_rollup

from .rollup_data import (
    expected_rollups,
    random_records,
    recent_morning,
    stored_rollups,
)

NOW = recent_morning()


@pytest.fixture
def keys(make_key, plan):
    from accounts.services.accounts import account_get_or_create

    other = account_get_or_create(name="Other", plan=plan)
    return [make_key()[0], make_key()[0], make_key(account=other)[0]]


def run(name: str, *args: str) -> str:
    out = StringIO()
    call_command(name, *args, stdout=out)
    return out.getvalue()


# G1-G6: rollups.


@pytest.mark.django_db
def test_g6_hourly_recompute_is_idempotent_and_matches_the_records(keys) -> None:
    since = NOW.replace(minute=0) - timedelta(hours=3)
    records = random_records(keys, since=since, hours=4, count=300)
    UsageRecord.objects.bulk_create(records)
    usage_rollup(granularity="hour", now=NOW)
    first = stored_rollups("hour")
    assert first == expected_rollups(records, "hour", since, since + timedelta(hours=4))
    computed = set(UsageRollup.objects.values_list("computed_at", flat=True))
    usage_rollup(granularity="hour", now=NOW)
    assert stored_rollups("hour") == first
    assert set(UsageRollup.objects.values_list("computed_at", flat=True)) != computed


@pytest.mark.django_db
def test_g6_late_finalization_and_deleted_groups_are_picked_up(keys) -> None:
    since = NOW.replace(minute=0) - timedelta(hours=3)
    records = random_records(keys, since=since, hours=4, count=120, seed=3)
    UsageRecord.objects.bulk_create(records)
    usage_rollup(granularity="hour", now=NOW)
    open_one = next(r for r in records if r.status == "started" and r.endpoint == "tts")
    UsageRecord.objects.filter(pk=open_one.pk).update(
        status="completed", ended_at=open_one.started_at + timedelta(seconds=3)
    )
    gone = records[0]
    group = UsageRecord.objects.filter(
        account_id=gone.account_id, api_key_id=gone.api_key_id, model=gone.model
    )
    group.delete()
    usage_rollup(granularity="hour", now=NOW)
    fresh = list(UsageRecord.objects.all())
    assert stored_rollups("hour") == expected_rollups(
        fresh, "hour", since, since + timedelta(hours=4)
    )


@pytest.mark.django_db
def test_g5_daily_rows_are_built_from_hourly_rows(keys) -> None:
    yesterday = NOW.replace(hour=0, minute=0) - timedelta(days=1)
    records = random_records(keys, since=yesterday, hours=34, count=200, seed=11)
    UsageRecord.objects.bulk_create(records)
    out = run(
        "rollup_usage", "--since", yesterday.isoformat(), "--until", NOW.isoformat()
    )
    assert out.startswith("hour: ") and "day: " in out
    assert stored_rollups("day") == expected_rollups(
        records, "day", yesterday, yesterday + timedelta(days=2)
    )
    before = stored_rollups("day")
    usage_rollup(granularity="day", now=NOW)
    assert stored_rollups("day") == before


@pytest.mark.django_db
def test_g4_window_is_whole_buckets_and_rows_outside_stay(keys) -> None:
    since = NOW.replace(minute=0) - timedelta(hours=6)
    records = random_records(keys, since=since, hours=6, count=100, seed=5)
    UsageRecord.objects.bulk_create(records)
    usage_rollup(granularity="hour", since=since, until=NOW)
    old = UsageRollup.objects.filter(
        bucket_start__lt=since + timedelta(hours=3)
    ).count()
    UsageRecord.objects.all().delete()
    usage_rollup(granularity="hour", now=NOW)  # the last 3 h (+ this hour) only
    assert UsageRollup.objects.count() == old > 0


def test_rollup_command_rejects_bad_input(db) -> None:
    with pytest.raises(CommandError):
        run("rollup_usage", "--since", "yesterday")
    with pytest.raises(CommandError):
        run("rollup_usage", "--since", "2026-09-02", "--until", "2026-09-01")


# U10, U12: reaper and purge.


@pytest.mark.django_db
def test_u10_reaper_abandons_stale_records_keeping_their_counters(
    keys, settings
) -> None:
    settings.USAGE_STALE_SECONDS = 15
    now = timezone.now()
    records = random_records(keys, since=now - timedelta(hours=1), hours=1, count=40)
    for r in records:
        r.status, r.ended_at = "started", None
        r.last_checkpoint_at = now - timedelta(seconds=20 if r.endpoint == "asr" else 5)
    UsageRecord.objects.bulk_create(records)
    stale = {r.pk: r.asr_audio_in_ms for r in records if r.endpoint == "asr"}
    assert tasks.reap_abandoned_usage() == len(stale)
    assert tasks.reap_abandoned_usage() == 0
    for record in UsageRecord.objects.filter(status="abandoned"):
        assert record.pk in stale and record.asr_audio_in_ms == stale[record.pk]
        assert record.ended_at == record.last_checkpoint_at
    assert UsageRecord.objects.filter(status="started").count() == len(records) - len(
        stale
    )


@pytest.mark.django_db
def test_u12_purge_deletes_old_finished_records_only(keys, settings) -> None:
    settings.USAGE_RECORD_RETENTION_DAYS = 90
    old = timezone.now() - timedelta(days=91)
    records = random_records(keys, since=old, hours=1, count=30)
    UsageRecord.objects.bulk_create(records)
    open_old = sum(r.status == "started" for r in records)
    assert tasks.purge_usage_records() == len(records) - open_old
    assert UsageRecord.objects.count() == open_old


# Q3, Q11: recount and reconcile.


@pytest.mark.django_db
def test_q3_recount_restores_the_invariant_and_is_then_a_no_op(keys) -> None:
    now = timezone.now()
    since = max(now - timedelta(hours=2), period_start(period_of(now)))
    records = random_records(keys, since=since, hours=1, count=50)
    UsageRecord.objects.bulk_create(records)  # around the services: no counters yet
    assert "4 counter(s) corrected" in run("recount_quota")
    assert "0 counter(s) corrected" in run("recount_quota")
    QuotaCounter.objects.filter(metric="tts_characters").update(used=1)
    assert "2 counter(s) corrected" in run("recount_quota", "--period", period_of(now))
    for account_id in {k.account_id for k in keys}:
        expected = sum(r.tts_chars_in for r in records if r.account_id == account_id)
        counter = QuotaCounter.objects.get(
            account_id=account_id, metric="tts_characters", period=period_of(now)
        )
        assert counter.used == expected
    assert "0 counter(s) corrected" in run("recount_quota", "--period", period_of(now))


def test_recount_refuses_bad_or_purged_periods(db) -> None:
    with pytest.raises(CommandError):
        run("recount_quota", "--period", "2026-13")
    with pytest.raises(CommandError):
        run("recount_quota", "--period", "2001-01")


@pytest.mark.django_db
def test_q11_reconcile_sets_busy_and_idle_mirrors(backend, keys) -> None:
    """Issue 9: a live lease no longer blocks reconciliation; its reservation counts."""
    limiter = get_limiter()
    busy, idle = keys[0].account_id, keys[2].account_id
    period = period_of(timezone.now())
    for account_id in (busy, idle):
        QuotaCounter.objects.create(
            account_id=account_id, period=period, metric="asr_audio_ms", used=100
        )
        limiter.seed_quota(
            account_id=account_id, metric="asr_audio_ms", period=period, used=5_000
        )
    limiter.acquire_lease(
        member="live", account_id=busy, account_limit=5, ttl_ms=60_000
    )
    limiter.reserve_quota(
        account_id=busy,
        metric="asr_audio_ms",
        period=period,
        amount=400,
        limit=None,
        partial=True,
        holder="live|record",
    )
    assert tasks.reconcile_quota_mirror() == 2
    remaining = {
        a: limiter.reserve_quota(
            account_id=a,
            metric="asr_audio_ms",
            period=period,
            amount=0,
            limit=10_000,
            partial=True,
        ).remaining
        for a in (busy, idle)
    }
    assert remaining == {busy: 9_500, idle: 9_900}
    assert quota_reconcile(periods=[period]) == 2  # idempotent
    assert remaining == {busy: 9_500, idle: 9_900}


# T1-T3: tasks, beat, the embedded scheduler, usage_maintenance.


def test_t1_beat_schedule_names_every_periodic_task(settings) -> None:
    from veena_site.celery import app

    schedule = settings.CELERY_BEAT_SCHEDULE
    assert {entry["task"] for entry in schedule.values()} >= set(tasks.PERIODIC_TASKS)
    intervals = {e["task"]: e["schedule"] for e in schedule.values()}
    assert intervals["accounts.reap_abandoned_usage"] == 30.0
    assert intervals["accounts.rollup_usage_hourly"] == 300.0
    assert intervals["accounts.rollup_usage_daily"] == 900.0
    assert intervals["accounts.reconcile_quota_mirror"] == 300.0
    purge = intervals["accounts.purge_usage_records"]
    assert (purge.hour, purge.minute) == ({3}, {17})
    assert app.conf.beat_schedule == schedule
    app.autodiscover_tasks(["accounts"], force=True)
    assert set(tasks.PERIODIC_TASKS) | {"accounts.rollup_usage_range"} <= set(app.tasks)


@pytest.mark.django_db
def test_g7_a_run_without_the_lock_does_nothing(keys, settings) -> None:
    settings.USAGE_STALE_SECONDS = 0
    now = timezone.now()
    records = random_records(keys, since=now - timedelta(hours=1), hours=1, count=5)
    for r in records:
        r.status, r.last_checkpoint_at = "started", now - timedelta(minutes=1)
    UsageRecord.objects.bulk_create(records)
    token = get_limiter().try_lock("reap_abandoned_usage", 10_000)
    assert tasks.reap_abandoned_usage() == 0
    get_limiter().unlock("reap_abandoned_usage", token)
    assert tasks.reap_abandoned_usage() == 5


@pytest.mark.django_db
def test_t3_usage_maintenance_runs_each_job_once(keys) -> None:
    out = run("usage_maintenance")
    for label in (
        "abandoned records reaped: 0",
        "expired leases swept: 0",
        "hourly rollup rows: 0",
        "daily rollup rows: 0",
        "quota mirrors reconciled: 0",
    ):
        assert label in out


@pytest.mark.django_db(transaction=True)
async def test_t3_embedded_scheduler_runs_tasks_in_process(keys, settings) -> None:
    from channels.db import database_sync_to_async

    settings.USAGE_STALE_SECONDS = 1
    now = timezone.now()
    record = random_records(keys, since=now - timedelta(minutes=5), hours=1, count=1)[0]
    record.status, record.ended_at = "started", None
    record.started_at = record.last_checkpoint_at = now - timedelta(minutes=1)
    await database_sync_to_async(UsageRecord.objects.bulk_create)([record])
    task = start_embedded_scheduler(
        {
            "reaper": {"task": "accounts.reap_abandoned_usage", "schedule": 0.05},
            "not ours": {"task": "tts.something", "schedule": 0.05},
        }
    )
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if (await UsageRecord.objects.aget(pk=record.pk)).status == "abandoned":
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await UsageRecord.objects.aget(pk=record.pk)).status == "abandoned"


def test_t3_scheduler_follows_intervals_and_crontabs(settings) -> None:
    now = datetime.now(UTC)
    assert 29 <= seconds_until_next(30.0, now) <= 30
    assert seconds_until_next(timedelta(seconds=5), now - timedelta(seconds=10)) == 0
    purge = settings.CELERY_BEAT_SCHEDULE["accounts.purge_usage_records"]["schedule"]
    assert 0 < seconds_until_next(purge, now) <= 86_400


# §12: system checks.


def test_checks_e002_e003_w001(settings) -> None:
    assert checks.lease_renewal_fits_ttl() == []
    settings.LEASE_RENEW_SECONDS = 11
    assert checks.lease_renewal_fits_ttl()[0].id == "accounts.E002"
    settings.USAGE_RECORD_RETENTION_DAYS = 0
    assert checks.retention_outlives_rollups()[0].id == "accounts.E003"
    settings.REDIS_URL, settings.DEBUG = "", False
    assert checks.memory_limiter_in_production()[0].id == "accounts.W001"
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    assert checks.memory_limiter_in_production() == []


def test_c4_production_defaults_free_a_crashed_slot_within_30s(tmp_path) -> None:
    """The defaults, read in a clean process: a lease expires within 30 s (C4, V4)."""
    import json
    import subprocess
    import sys

    from tests.conftest import ROOT, child_env

    names = [
        "LEASE_TTL_SECONDS",
        "LEASE_RENEW_SECONDS",
        "USAGE_CHECKPOINT_SECONDS",
        "USAGE_STALE_SECONDS",
        "API_KEY_CACHE_SECONDS",
        "ASR_QUOTA_CHUNK_MS",
        "ROLLUP_LOOKBACK_HOURS",
        "USAGE_RECORD_RETENTION_DAYS",
        "REDIS_KEY_PREFIX",
    ]
    env = {
        k: v
        for k, v in child_env(
            DJANGO_SETTINGS_MODULE="veena_site.settings", DATA_DIR=str(tmp_path)
        ).items()
        if k not in names
    }
    code = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        f"print(json.dumps({{n: getattr(s, n) for n in {names!r}}}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {
        "LEASE_TTL_SECONDS": 30.0,
        "LEASE_RENEW_SECONDS": 10.0,
        "USAGE_CHECKPOINT_SECONDS": 5.0,
        "USAGE_STALE_SECONDS": 15,
        "API_KEY_CACHE_SECONDS": 30.0,
        "ASR_QUOTA_CHUNK_MS": 10_000,
        "ROLLUP_LOOKBACK_HOURS": 3,
        "USAGE_RECORD_RETENTION_DAYS": 90,
        "REDIS_KEY_PREFIX": "veena:",
    }
    assert got["LEASE_TTL_SECONDS"] <= 30


@pytest.mark.django_db
def test_g7_rollups_are_single_flight_per_granularity(keys) -> None:
    token = get_limiter().try_lock("rollup_usage:hour", 10_000)
    with pytest.raises(CommandError, match="hour rollup is running"):
        run("rollup_usage", "--granularity", "hour")
    assert tasks.rollup_usage_hourly() == 0
    assert "day: 0 rows" in run("rollup_usage", "--granularity", "day")
    get_limiter().unlock("rollup_usage:hour", token)
    assert "hour: 0 rows" in run("rollup_usage", "--granularity", "hour")
