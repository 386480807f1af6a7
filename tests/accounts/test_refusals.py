"""Every request that passed authentication leaves a record, refused ones included (issue 30
item 3): its error code, request id and the code sent, zero units; a flood of refusals is
folded into one row per key, route, code and hour; failures before authentication are a
metric only."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.db.models import Sum
from prometheus_client import REGISTRY

from accounts import refusals
from accounts.admission import admit
from accounts.exceptions import AdmissionDenied
from accounts.metering import refuse
from accounts.models.rollups import AccountRollup, UsageRollup
from accounts.models.usage import UsageRecord
from veena_site.asgi import application

from .conftest import bearer_scope

pytestmark = pytest.mark.django_db(transaction=True)


def auth_failures(endpoint: str, reason: str) -> float:
    labels = {"endpoint": endpoint, "reason": reason}
    return REGISTRY.get_sample_value("veena_auth_failures_total", labels) or 0.0


async def test_a_refused_stream_leaves_a_record_with_the_code_sent(keyed: Any) -> None:
    api_key, raw = await keyed({"max_concurrent_streams": 1})
    holder = await admit(bearer_scope(raw), endpoint="tts")
    comm = WebsocketCommunicator(
        application,
        "/v1/tts/ws",
        headers=[(b"authorization", b"Bearer " + raw.encode())],
    )
    await comm.connect()
    error = json.loads(await comm.receive_from(timeout=5))
    close = await comm.receive_output(timeout=5)
    assert error["error"]["code"] == "RATE_LIMIT_EXCEEDED"
    await comm.disconnect()
    record = await UsageRecord.objects.aget(account_id=api_key.account_id)
    assert (record.status, record.error_code, record.close_code, record.route) == (
        "failed",
        "too_many_streams",
        close["code"],
        "tts_ws",
    )
    assert record.request_id == error["error"]["request_id"]  # what the client quotes
    assert (record.tts_chars_in, record.tts_audio_out_ms, record.requests) == (0, 0, 1)
    row = await AccountRollup.objects.aget(
        granularity="day", account_id=api_key.account_id
    )
    assert (row.requests, row.failed, row.error_code) == (1, 1, "too_many_streams")
    await holder.release()


async def test_a_bad_key_is_a_metric_and_no_account_usage(keyed: Any) -> None:
    await keyed()
    before = auth_failures("asr", "invalid_api_key")
    with pytest.raises(AdmissionDenied):
        await admit(bearer_scope("vk_test_" + "x" * 38), endpoint="asr")
    assert auth_failures("asr", "invalid_api_key") == before + 1
    assert not await UsageRecord.objects.aexists()


async def test_a_flood_of_refusals_is_folded_not_written_one_by_one(
    keyed: Any,
) -> None:
    api_key, raw = await keyed()
    admission = await admit(bearer_scope(raw), endpoint="asr")
    flood = 150
    for n in range(flood):
        await refuse(
            admission,
            endpoint="asr",
            request_id=f"r{n}",
            error_code="rate_limited",
            close_code=1008,
        )
    waiting = refusals._recorder.flusher
    assert waiting is not None and not waiting.done()  # the fold a second later
    await refusals.flush_refusals()
    await asyncio.sleep(0)
    assert waiting.cancelled()  # folded now: nothing waits behind the flush
    rows = [r async for r in UsageRecord.objects.filter(account_id=api_key.account_id)]
    kept = [r for r in rows if r.requests == 1]
    folded = [r for r in rows if r.requests > 1]
    assert len(kept) == refusals.REFUSALS_KEPT
    assert {r.request_id for r in kept} == {f"r{n}" for n in range(len(kept))}
    assert len(folded) == 1 and folded[0].requests == flood - refusals.REFUSALS_KEPT
    assert folded[0].request_id == f"r{flood - 1}"  # the latest one folded
    total = await UsageRollup.objects.filter(
        granularity="hour", api_key_id=api_key.id
    ).aaggregate(requests=Sum("requests"), failed=Sum("failed"))
    assert total == {"requests": flood, "failed": flood}
    await admission.release()


async def test_a_fold_scheduled_inside_a_request_lands_after_the_request_ended(
    keyed: Any,
) -> None:
    """A REST refusal is counted inside the request (a sync middleware's thread running
    the async view through async_to_sync); its fold runs a second later, after that
    thread's executor quit, and must still reach the database."""
    api_key, raw = await keyed()
    admission = await admit(bearer_scope(raw), endpoint="tts")
    flood = refusals.REFUSALS_KEPT + 3

    async def view() -> None:
        for n in range(flood):
            await refuse(
                admission,
                endpoint="tts",
                request_id=f"q{n}",
                error_code="validation_error",
                close_code=400,
            )

    await sync_to_async(async_to_sync(view), thread_sensitive=False)()
    flusher = refusals._recorder.flusher
    assert flusher is not None
    await asyncio.wait_for(asyncio.shield(flusher), refusals.FLUSH_S + 5)
    assert flusher.exception() is None
    folded = UsageRecord.objects.filter(account_id=api_key.account_id, requests__gt=1)
    assert [r.requests async for r in folded] == [flood - refusals.REFUSALS_KEPT]
    await admission.release()
