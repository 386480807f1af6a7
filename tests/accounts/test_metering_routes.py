"""What the dashboard needs from metering: the route and the per-item latency histogram."""

from __future__ import annotations

import pytest

from accounts import histogram
from accounts.admission import admit
from accounts.metering import UsageMeter
from accounts.models.usage import UsageRecord
from accounts.services.rollups import usage_rollup

from .conftest import bearer_scope

pytestmark = pytest.mark.django_db(transaction=True)


async def test_routes_follow_the_admission_transport_and_endpoint(keyed) -> None:
    _, raw = await keyed()
    ws = await admit(bearer_scope(raw), endpoint="tts")
    rest = await admit({**bearer_scope(raw), "type": "http"}, endpoint="tts")
    asr = await admit(bearer_scope(raw), endpoint="asr")
    asr_rest = await admit({**bearer_scope(raw), "type": "http"}, endpoint="asr")
    meters = [
        UsageMeter.for_admission(ws, endpoint="tts", request_id="a", model="m"),
        UsageMeter.for_admission(rest, endpoint="tts", request_id="b", model="m"),
        UsageMeter.for_admission(asr, endpoint="asr", request_id="c", model="m"),
        UsageMeter.for_admission(asr_rest, endpoint="asr", request_id="e", model="m"),
        UsageMeter.anonymous(
            endpoint="tts", request_id="d", model="m", route="tts_rest"
        ),
    ]
    for meter in meters:
        await meter.open()
        await meter.finish(status="completed")
    routes = [(await UsageRecord.objects.aget(pk=m.record_id)).route for m in meters]
    assert routes == ["tts_ws", "tts_rest", "asr_realtime", "asr_rest", "tts_rest"]
    for admission in (ws, rest, asr, asr_rest):
        await admission.release()


async def test_asr_item_latencies_are_binned_checkpointed_and_rolled_up(keyed) -> None:
    _, raw = await keyed()
    admission = await admit(bearer_scope(raw), endpoint="asr")
    meter = UsageMeter.for_admission(
        admission, endpoint="asr", request_id="s", model="w"
    )
    await meter.open()
    meter.add(asr_items=1, asr_latency_ms=120)
    await meter.checkpoint()
    record = await UsageRecord.objects.aget(pk=meter.record_id)
    assert sum(record.asr_latency_hist) == 1
    meter.add(asr_items=1, asr_latency_ms=2_500)
    await meter.finish(status="completed")
    record = await UsageRecord.objects.aget(pk=meter.record_id)
    expected = histogram.empty()
    histogram.observe(expected, 120)
    histogram.observe(expected, 2_500)
    assert record.asr_latency_hist == expected
    await admission.release()
    from channels.db import database_sync_to_async

    await database_sync_to_async(usage_rollup)(granularity="hour")
    from accounts.models.rollups import UsageRollup

    row = await UsageRollup.objects.aget(
        granularity="hour", api_key_id=record.api_key_id
    )
    assert [getattr(row, f) for f in histogram.ASR_LATENCY_FIELDS] == expected
