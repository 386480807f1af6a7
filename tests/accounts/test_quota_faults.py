"""Accounting under faults (issue 9 item 6).

A quota mirror reconciles to the database plus the live reservations, also while the account
has live streams, so a crashed gateway's unsettled reservation goes back to the account; and
``rollup_usage --since`` older than retention never deletes rollups it cannot rebuild.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.core.management import call_command
from django.utils import timezone

from accounts.admission import admit
from accounts.limits import get_limiter
from accounts.metering import UsageMeter
from accounts.models.rollups import UsageRollup
from accounts.services.quota import period_of, quota_reconcile
from accounts.services.rollups import floor_bucket
from tests.accounts.conftest import bearer_scope as scope

LIMIT_MS = 100_000


async def remaining_ms(account_id: int) -> int | None:
    grant = await asyncio.to_thread(
        get_limiter().reserve_quota,
        account_id=account_id,
        metric="asr_audio_ms",
        period=period_of(timezone.now()),
        amount=0,
        limit=LIMIT_MS,
        partial=True,
    )
    assert grant is not None
    return grant.remaining


@pytest.mark.django_db(transaction=True)
async def test_q11_a_crashed_streams_reservation_goes_back_while_others_stream(
    backend: str, keyed: Any
) -> None:
    api_key, raw = await keyed({"monthly_asr_seconds": LIMIT_MS // 1000})
    account_id = api_key.account_id
    crashed = await admit(scope(raw), endpoint="asr")
    lost = UsageMeter.for_admission(
        crashed, endpoint="asr", request_id="lost", model="m"
    )
    await lost.open()
    assert await lost.reserve_asr_ms(10_000) == 10_000
    lost.add_audio(2 * 16_000, 16_000)
    await lost.checkpoint()  # 2 s reach the database, then its gateway is killed:
    await asyncio.to_thread(  # no finish, no release; its lease runs out
        get_limiter().release_lease,
        member=str(crashed.stream_id),
        account_id=account_id,
        key_id=crashed.lease_key_id,
    )
    live = await admit(scope(raw), endpoint="asr")  # the account stays busy
    meter = UsageMeter.for_admission(live, endpoint="asr", request_id="live", model="m")
    await meter.open()
    assert await meter.reserve_asr_ms(5_000) == 5_000
    assert await remaining_ms(account_id) == LIMIT_MS - 15_000

    periods = [period_of(timezone.now())]
    assert await database_sync_to_async(quota_reconcile)(periods=periods) >= 1
    # The database (2 s checkpointed) plus the live stream's 5 s, not the lost 8 s.
    assert await remaining_ms(account_id) == LIMIT_MS - 7_000

    meter.add_audio(16_000, 16_000)
    await meter.finish(status="completed")  # 1 s metered, 4 s given back (Q9)
    await live.release()
    assert await remaining_ms(account_id) == LIMIT_MS - 3_000
    assert await database_sync_to_async(quota_reconcile)(periods=periods) >= 1
    assert await remaining_ms(account_id) == LIMIT_MS - 3_000


@pytest.mark.django_db
def test_rollup_since_older_than_retention_keeps_rows_it_cannot_rebuild(
    make_key: Any, settings: Any
) -> None:
    settings.USAGE_RECORD_RETENTION_DAYS = 90
    api_key, _ = make_key()
    now = timezone.now()
    old_hour = floor_bucket(now - timedelta(days=100), "hour")
    recent_hour = floor_bucket(now - timedelta(days=10), "hour")
    for bucket in (old_hour, recent_hour):  # their records are gone (purged / none)
        UsageRollup.objects.create(
            granularity="hour",
            bucket_start=bucket,
            account=api_key.account,
            api_key=api_key,
            endpoint="tts",
            model="m",
            requests=3,
            computed_at=now,
        )
    out = StringIO()
    since = (now - timedelta(days=120)).isoformat()
    call_command("rollup_usage", "--since", since, "--granularity", "hour", stdout=out)
    kept = UsageRollup.objects.filter(granularity="hour")
    assert list(kept.values_list("bucket_start", flat=True)) == [old_hour]
    assert "kept" in out.getvalue() and "RETENTION" in out.getvalue()
