"""Usage metering (accounts U1–U10, Q3, Q7–Q9): the UsageMeter that consumers call."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.db import DatabaseError
from django.db.models import Sum
from django.utils import timezone

from accounts import metering
from accounts.admission import admit
from accounts.exceptions import AdmissionDenied
from accounts.limits import get_limiter
from accounts.metering import UsageCounters, UsageMeter, stream_tick
from accounts.models.api_keys import ApiKey
from accounts.models.quota import QuotaCounter
from accounts.models.usage import UsageRecord
from accounts.services.settling import usage_reap_abandoned

from .conftest import bearer_scope

pytestmark = pytest.mark.django_db(transaction=True)


async def admitted(keyed, endpoint="tts", plan=None):
    api_key, raw = await keyed(plan)
    return await admit(bearer_scope(raw), endpoint=endpoint), api_key


def quota_used(account_id: int, metric: str) -> int:
    return sum(
        QuotaCounter.objects.filter(account_id=account_id, metric=metric).values_list(
            "used", flat=True
        )
    )


@database_sync_to_async
def assert_q3_invariant(account_id: int) -> None:
    """Q3: each counter equals the sum of its records' counters."""
    records = UsageRecord.objects.filter(account_id=account_id).aggregate(
        tts=Sum("tts_chars_in"), asr=Sum("asr_audio_in_ms")
    )
    assert quota_used(account_id, "tts_characters") == (records["tts"] or 0)
    assert quota_used(account_id, "asr_audio_ms") == (records["asr"] or 0)


def mirror(admission, metric: str) -> int | None:
    """The mirror's value (None: not seeded), read as what remains of a huge limit."""
    huge = 10**12
    grant = get_limiter().reserve_quota(
        account_id=admission.principal.account_id,
        metric=metric,
        period=timezone.now().strftime("%Y-%m"),
        amount=0,
        limit=huge,
        partial=True,
    )
    return None if grant is None else huge - grant.remaining


# U1-U3: the record is committed before any audio.


async def test_u2_open_commits_a_started_record(keyed) -> None:
    admission, api_key = await admitted(keyed, "asr")
    meter = UsageMeter.for_admission(
        admission, endpoint="asr", request_id="sess_1", model="whisper-tiny.en"
    )
    assert not await UsageRecord.objects.filter(pk=meter.record_id).aexists()
    await meter.open()
    await meter.open()  # idempotent
    record = await UsageRecord.objects.aget(pk=meter.record_id)
    assert record.status == "started"
    assert (record.account_id, record.api_key_id) == (api_key.account_id, api_key.id)
    assert (record.endpoint, record.model, record.request_id) == (
        "asr",
        "whisper-tiny.en",
        "sess_1",
    )
    assert record.stream_id == admission.stream_id
    assert record.period == record.started_at.strftime("%Y-%m")
    assert record.instance.endswith(f":{__import__('os').getpid()}")
    await meter.finish(status="completed")
    await admission.release()


async def test_u2_concurrent_opens_insert_one_row(keyed) -> None:
    admission, _ = await admitted(keyed)
    meter = UsageMeter.for_admission(
        admission, endpoint="tts", request_id="r", model="m"
    )
    await asyncio.gather(meter.open(), meter.open(), meter.open())
    assert await UsageRecord.objects.filter(stream_id=admission.stream_id).acount() == 1


# U5, U8: checkpoints and finalization.


async def test_u5_checkpoint_writes_absolute_counters_and_quota_delta(keyed) -> None:
    admission, api_key = await admitted(keyed, "asr")
    meter = UsageMeter.for_admission(
        admission, endpoint="asr", request_id="s", model="m"
    )
    await meter.open()
    meter.add_audio(16_000 * 3, 16_000)
    meter.add(asr_items=1, asr_chars_out=12, asr_latency_ms=250)
    await meter.checkpoint()
    await meter.checkpoint()  # replaying identical values changes no counter
    record = await UsageRecord.objects.aget(pk=meter.record_id)
    assert (record.asr_audio_in_ms, record.asr_chars_out, record.asr_items) == (
        3000,
        12,
        1,
    )
    assert (record.asr_latency_ms_sum, record.asr_latency_ms_max) == (250, 250)
    assert record.checkpoint_seq == 2
    assert (
        await database_sync_to_async(quota_used)(api_key.account_id, "asr_audio_ms")
        == 3000
    )
    await assert_q3_invariant(api_key.account_id)
    await meter.finish(status="completed")


async def test_u8_finish_once_with_every_field(keyed) -> None:
    admission, api_key = await admitted(keyed, "tts")
    meter = UsageMeter.for_admission(
        admission, endpoint="tts", request_id="r1", model="m"
    )
    await meter.reserve_tts_chars(11)
    await meter.open()
    meter.add(tts_chars_in=11)
    meter.add_audio(16_000 + 8, 16_000)  # 1000.5 ms → 1000
    assert meter.counters == UsageCounters(tts_chars_in=11, tts_audio_out_ms=1000)
    first, second = await asyncio.gather(
        meter.finish(status="completed", close_code=1000, ttfb_ms=42, rtf=0.25),
        meter.finish(status="failed", error_code="late"),
    )
    assert (first, second) == (True, False)
    assert await meter.finish(status="cancelled") is False
    meter.add(tts_chars_in=5)  # ignored after finish
    record = await UsageRecord.objects.aget(pk=meter.record_id)
    assert record.status == "completed" and record.error_code == ""
    assert (record.close_code, record.ttfb_ms, record.rtf) == (1000, 42, 0.25)
    assert (record.tts_chars_in, record.tts_audio_out_ms) == (11, 1000)
    assert record.ended_at is not None and record.ended_at >= record.started_at
    await assert_q3_invariant(api_key.account_id)
    await admission.release()


async def test_u8_finish_survives_cancellation_of_its_caller(keyed) -> None:
    admission, _ = await admitted(keyed, "asr")
    meter = UsageMeter.for_admission(
        admission, endpoint="asr", request_id="s", model="m"
    )
    await meter.open()
    meter.add(asr_audio_in_ms=500)

    async def disconnect() -> None:
        await asyncio.shield(meter.finish(status="cancelled", close_code=1001))

    caller = asyncio.ensure_future(disconnect())
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert await meter.finish(status="completed") is False  # waits for the first
    record = await UsageRecord.objects.aget(pk=meter.record_id)
    assert (record.status, record.asr_audio_in_ms) == ("cancelled", 500)


async def test_u8_never_opened_usage_is_still_recorded(keyed) -> None:
    admission, api_key = await admitted(keyed, "tts")
    empty = UsageMeter.for_admission(
        admission, endpoint="tts", request_id="a", model="m"
    )
    assert await empty.finish(status="cancelled") is False
    assert not await UsageRecord.objects.filter(pk=empty.record_id).aexists()
    used = UsageMeter.for_admission(
        admission, endpoint="tts", request_id="b", model="m"
    )
    used.add(tts_chars_in=7)
    assert await used.finish(status="failed", error_code="worker_lost")
    record = await UsageRecord.objects.aget(pk=used.record_id)
    assert (record.status, record.error_code, record.tts_chars_in) == (
        "failed",
        "worker_lost",
        7,
    )
    await assert_q3_invariant(api_key.account_id)


# U6, U7: the stream stops rather than serve unmetered.


async def test_u6_reaped_record_stops_the_stream_and_keeps_its_checkpoint(
    keyed, settings
) -> None:
    admission, api_key = await admitted(keyed, "asr")
    meter = UsageMeter.for_admission(
        admission, endpoint="asr", request_id="s", model="m"
    )
    await meter.open()
    meter.add(asr_audio_in_ms=2000)
    await meter.checkpoint()
    meter.add(asr_audio_in_ms=1000)  # never checkpointed
    reaped = await database_sync_to_async(usage_reap_abandoned)(
        now=timezone.now() + timedelta(minutes=1), stale_seconds=15
    )
    assert reaped == 1
    with pytest.raises(AdmissionDenied) as info:
        await meter.checkpoint()
    assert info.value.reason == "usage_unavailable"
    record = await UsageRecord.objects.aget(pk=meter.record_id)
    assert (record.status, record.asr_audio_in_ms) == ("abandoned", 2000)
    assert record.ended_at == record.last_checkpoint_at
    settings.USAGE_CHECKPOINT_SECONDS = 0
    assert await stream_tick(admission, meter) == "usage_unavailable"
    # The stream's own end still lands, and corrects the record: never abandoned with
    # less than was served (issue 30).
    done = await meter.finish(status="failed", error_code="usage_unavailable")
    assert done is True
    record = await UsageRecord.objects.aget(pk=meter.record_id)
    assert (record.status, record.asr_audio_in_ms) == ("failed", 3000)
    await assert_q3_invariant(api_key.account_id)


async def test_u7_checkpoints_failing_for_the_stale_time_stop_the_stream(
    keyed, settings, monkeypatch
) -> None:
    admission, _ = await admitted(keyed, "asr")
    meter = UsageMeter.for_admission(
        admission, endpoint="asr", request_id="s", model="m"
    )
    await meter.open()

    def down(**kwargs):
        raise DatabaseError("database is down")

    monkeypatch.setattr(metering, "usage_checkpoint", down)
    await meter.checkpoint()  # one failure inside the stale time is only logged
    settings.USAGE_STALE_SECONDS = 0
    with pytest.raises(AdmissionDenied) as info:
        await meter.checkpoint()
    assert info.value.reason == "usage_unavailable"
    monkeypatch.undo()
    await meter.finish(status="failed", error_code="usage_unavailable")


async def test_e6_stream_tick_checkpoints_when_due(keyed, settings) -> None:
    admission, _ = await admitted(keyed, "asr")
    meter = UsageMeter.for_admission(
        admission, endpoint="asr", request_id="s", model="m"
    )
    await meter.open()
    meter.add(asr_audio_in_ms=100)
    assert await stream_tick(admission, meter) is None  # not due yet
    assert (await UsageRecord.objects.aget(pk=meter.record_id)).checkpoint_seq == 0
    settings.USAGE_CHECKPOINT_SECONDS = 0
    assert await stream_tick(admission, meter) is None
    record = await UsageRecord.objects.aget(pk=meter.record_id)
    assert (record.checkpoint_seq, record.asr_audio_in_ms) == (1, 100)
    assert await stream_tick(admission, None) is None  # between TTS requests
    await meter.finish(status="completed")


# Q7-Q9: quota reservations, on both limiter backends.


async def test_q7_tts_units_reserve_all_or_nothing(backend, keyed) -> None:
    admission, api_key = await admitted(keyed, "tts", {"monthly_tts_characters": 100})
    meter = UsageMeter.for_admission(
        admission, endpoint="tts", request_id="r", model="m"
    )
    await meter.reserve_tts_chars(60)
    with pytest.raises(AdmissionDenied) as info:
        await meter.reserve_tts_chars(50)
    assert info.value.reason == "quota_exceeded"
    await meter.reserve_tts_chars(40)
    assert meter.reserved_tts_chars == 100
    await meter.open()
    meter.add(tts_chars_in=100)
    await meter.finish(status="completed")
    await assert_q3_invariant(api_key.account_id)
    assert (
        await database_sync_to_async(quota_used)(api_key.account_id, "tts_characters")
        == 100
    )
    await admission.release()
    refused = UsageMeter.for_admission(
        admission, endpoint="tts", request_id="x", model="m"
    )
    with pytest.raises(AdmissionDenied):
        await refused.reserve_tts_chars(1)


async def test_q9_reservation_of_a_job_never_accepted_is_returned(
    backend, keyed
) -> None:
    admission, _ = await admitted(keyed, "tts", {"monthly_tts_characters": 100})
    meter = UsageMeter.for_admission(
        admission, endpoint="tts", request_id="r", model="m"
    )
    await meter.reserve_tts_chars(80)
    await meter.open()
    await meter.finish(status="failed", error_code="streaming_overloaded")
    assert await database_sync_to_async(mirror)(admission, "tts_characters") == 0
    again = UsageMeter.for_admission(
        admission, endpoint="tts", request_id="r2", model="m"
    )
    await again.reserve_tts_chars(100)
    await again.finish(status="cancelled")


async def test_q8_asr_quota_runs_out_mid_stream(backend, keyed, settings) -> None:
    """Chunks of 10 s against 25 s of quota: grants 10, 10, 5, then 0; totals agree."""
    settings.ASR_QUOTA_CHUNK_MS = 10_000
    api_key, raw = await keyed({"monthly_asr_seconds": 25})
    admission = await admit(bearer_scope(raw), endpoint="asr")
    meter = UsageMeter.for_admission(
        admission, endpoint="asr", request_id="s", model="m"
    )
    await meter.open()
    offered = 16_000 * 40  # the client streams 40 s in 100 ms appends
    accepted = 0
    stopped = False
    for _ in range(offered // 1600):
        if meter.asr_ms_available < 100:
            if await meter.reserve_asr_ms() == 0:
                stopped = True
                break
        fits = min(1600, meter.asr_ms_available * 16)
        meter.add_audio(fits, 16_000)
        accepted += fits
        if fits < 1600:  # the rest of this append is dropped, unmetered
            if await meter.reserve_asr_ms() == 0:
                stopped = True
                break
    assert stopped
    assert meter.reserved_asr_ms == 25_000
    assert accepted == 16_000 * 25
    assert meter.counters.asr_audio_in_ms == 25_000
    await meter.finish(status="failed", error_code="quota_exceeded", close_code=1008)
    record = await UsageRecord.objects.aget(pk=meter.record_id)
    assert record.asr_audio_in_ms == 25_000
    assert (
        await database_sync_to_async(quota_used)(api_key.account_id, "asr_audio_ms")
        == 25_000
    )
    assert await database_sync_to_async(mirror)(admission, "asr_audio_ms") == 25_000
    await admission.release()
    with pytest.raises(AdmissionDenied) as info:
        await admit(bearer_scope(raw), endpoint="asr")
    assert info.value.reason == "quota_exceeded"


async def test_q8_accept_asr_audio_reserves_as_needed_and_counts_what_fits(
    backend, keyed, settings
) -> None:
    """24 kHz appends of 100 ms against 1 s of quota in chunks of 400 ms: the tenth
    append is the last one that fits whole; the eleventh gets nothing; the count is
    exactly what was accepted, and ``count=False`` (the REST path) counts nothing."""
    settings.ASR_QUOTA_CHUNK_MS = 400
    api_key, raw = await keyed({"monthly_asr_seconds": 1})
    admission = await admit(bearer_scope(raw), endpoint="asr")
    meter = UsageMeter.for_admission(
        admission, endpoint="asr", request_id="s", model="m"
    )
    await meter.open()
    assert await meter.accept_asr_audio(2400, 24_000, count=False) == 2400
    assert meter.counters.asr_audio_in_ms == 0 and meter.reserved_asr_ms == 400
    got = [await meter.accept_asr_audio(2400, 24_000, count=True) for _ in range(11)]
    assert got == [2400] * 10 + [0]
    assert meter.reserved_asr_ms == 1000 and meter.counters.asr_audio_in_ms == 1000
    meter.remove_audio(2400, 24_000)  # an append given back (AI-1 step 6)
    assert meter.counters.asr_audio_in_ms == 900
    await meter.finish(status="completed")
    await admission.release()


async def test_q9_unused_asr_grant_goes_back(backend, keyed) -> None:
    admission, _ = await admitted(keyed, "asr", {"monthly_asr_seconds": 60})
    meter = UsageMeter.for_admission(
        admission, endpoint="asr", request_id="s", model="m"
    )
    assert await meter.reserve_asr_ms(10_000) == 10_000
    await meter.open()
    meter.add(asr_audio_in_ms=3_000)
    await meter.finish(status="completed")
    assert await database_sync_to_async(mirror)(admission, "asr_audio_ms") == 3_000


def test_q1_audio_milliseconds_are_floored_on_the_running_total() -> None:
    meter = UsageMeter.anonymous(endpoint="asr", request_id="s", model="m")
    for _ in range(24):
        meter.add_audio(1, 24_000)
    assert meter.counters.asr_audio_in_ms == 1
    meter.add_audio(23, 24_000)
    assert meter.counters.asr_audio_in_ms == 1
    meter.add_audio(1, 24_000)
    assert meter.counters.asr_audio_in_ms == 2


# tts W7: auth off.


async def test_anonymous_meter_records_to_the_builtin_key() -> None:
    first = UsageMeter.anonymous(endpoint="tts", request_id="a", model="m")
    await first.reserve_tts_chars(10)
    await first.open()
    first.add(tts_chars_in=10)
    assert await first.finish(status="completed")
    second = UsageMeter.anonymous(endpoint="tts", request_id="b", model="m")
    await second.open()
    await second.finish(status="cancelled")
    records = [r async for r in UsageRecord.objects.select_related("api_key__account")]
    assert {r.api_key_id for r in records} == {records[0].api_key_id}
    assert records[0].api_key.account.slug == "anonymous"
    assert await ApiKey.objects.acount() == 1
    key = await ApiKey.objects.aget()
    assert (key.name, key.status) == ("anonymous", "active")
    await assert_q3_invariant(key.account_id)


def test_public_api_surface() -> None:
    import inspect

    # Route: a meter's opener may name its route (POST /v1/tts with auth off), and tts/
    # may not import accounts.models (accounts L2).
    assert set(metering.__all__) == {
        "Route",
        "StreamUsage",  # tick and release, shared by tts.usage and asr.usage
        "UsageCounters",
        "UsageMeter",
        "refuse",  # a refused request's record (issue 30)
        "stream_tick",
    }
    for name in (
        "open",
        "reserve_tts_chars",
        "reserve_asr_ms",
        "checkpoint",
        "finish",
        "tick",
    ):
        assert inspect.iscoroutinefunction(getattr(UsageMeter, name)), name
    assert not inspect.iscoroutinefunction(UsageMeter.add)
    finish = inspect.signature(UsageMeter.finish).parameters
    assert list(finish) == [
        "self",
        "status",
        "error_code",
        "close_code",
        "ttfb_ms",
        "rtf",
    ]
    assert uuid.UUID(
        str(UsageMeter.anonymous(endpoint="tts", request_id="r", model="m").record_id)
    )
