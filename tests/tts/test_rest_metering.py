"""Admission, quota and usage records of ``POST /v1/tts`` (docs/specs/tts-ws.md H1, H4, H5, §6, §12)
through the real ASGI application with the embedded worker and the fake engine."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from accounts.models.usage import UsageRecord
from tests.conftest import KeyMaker
from tests.tts.conftest import (
    Opener,
    bearer,
    chars_used,
    lease_free,
    open_records,
    revoke_once_busy,
    usage_records,
)
from tests.tts.test_rest import auth, http, post
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "Hello world. How are you today?"


async def test_tts_h1_u1_rest_request_has_a_record_and_gives_the_lease_back(
    limits_backend: str, embedded_worker: WorkerRuntime, keyed: KeyMaker
) -> None:
    api_key, raw = await keyed({"monthly_tts_characters": 1000})
    response = await post(
        {"text": TEXT, "format": "pcm", "sample_rate": 24000},
        raw,
        {"X-Request-Id": "rest-rec"},
    )
    assert response.status_code == 200
    record = await UsageRecord.objects.aget(request_id="rest-rec")
    assert (record.status, record.endpoint, record.api_key_id) == (
        "completed",
        "tts",
        api_key.id,
    )
    assert record.tts_chars_in == len(TEXT)
    assert record.tts_audio_out_ms == len(response.content) // 2 * 1000 // 24000
    assert record.tts_audio_out_ms / 1000 == pytest.approx(
        float(response["X-Audio-Duration-Seconds"]), abs=0.01
    )
    assert record.ttfb_ms is None and record.rtf is not None and record.rtf > 0
    assert await chars_used(api_key.account_id) == len(TEXT)
    assert await lease_free(api_key.account_id)


async def test_tts_h4_quota_exceeded_is_402_and_charges_nothing(
    limits_backend: str, embedded_worker: WorkerRuntime, keyed: KeyMaker
) -> None:
    api_key, raw = await keyed({"monthly_tts_characters": 20})
    response = await post({"text": TEXT}, raw)
    assert response.status_code == 402
    assert response.json()["error"]["code"] == "QUOTA_EXCEEDED"
    assert "Retry-After" not in response.headers
    assert await chars_used(api_key.account_id) == 0
    assert [r.tts_chars_in for r in await usage_records(api_key.account_id)] in (
        [],
        [0],
    )
    assert (await post({"text": "x" * 20}, raw)).status_code == 200
    refused = await post({"text": "y"}, raw)  # accounts Q6: nothing remains
    assert refused.status_code == 402
    assert await chars_used(api_key.account_id) == 20
    assert await lease_free(api_key.account_id)


async def test_tts_h4_rate_limited_is_429_with_retry_after(
    limits_backend: str, embedded_worker: WorkerRuntime, keyed: KeyMaker
) -> None:
    _, raw = await keyed({"requests_per_minute": 1})
    assert (await post({"text": TEXT}, raw)).status_code == 200
    response = await post({"text": TEXT}, raw)
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["code"] == "RATE_LIMIT_EXCEEDED"
    assert 1 <= error["retry_after_ms"] <= 60_000
    assert int(response["Retry-After"]) == -(-error["retry_after_ms"] // 1000)


async def test_tts_h1_rest_counts_against_the_stream_limit(
    slow_fake: WorkerRuntime, keyed: KeyMaker, open_stream: Opener
) -> None:
    api_key, raw = await keyed({"max_concurrent_streams": 1})
    stream = await open_stream(headers=bearer(raw))
    await stream.send({"text": "b" * 2000})
    await stream.event("header")
    response = await post({"text": TEXT}, raw)
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "RATE_LIMIT_EXCEEDED"
    assert response["Retry-After"] == "1"
    await stream.send({"event": "cancel"})
    await stream.closed()
    assert await lease_free(api_key.account_id)
    assert (await post({"text": TEXT}, raw)).status_code == 200


async def test_tts_h4_no_worker_is_a_failed_record_with_nothing_charged(
    keyed: KeyMaker,
) -> None:
    api_key, raw = await keyed({"monthly_tts_characters": 100})
    response = await post({"text": TEXT}, raw, {"X-Request-Id": "no-worker"})
    assert response.status_code == 503
    record = await UsageRecord.objects.aget(request_id="no-worker")
    assert (record.status, record.error_code, record.tts_chars_in) == (
        "failed",
        "model_not_loaded",
        0,
    )
    assert await chars_used(api_key.account_id) == 0
    assert await lease_free(api_key.account_id)


async def test_tts_h5_client_disconnect_is_metered_cancelled(
    slow_fake: WorkerRuntime, keyed: KeyMaker
) -> None:
    api_key, raw = await keyed()
    body = json.dumps({"text": "h" * 3000}).encode()
    headers = {"Content-Type": "application/json", "X-Request-Id": "gone", **auth(raw)}
    comm = http("POST", "/v1/tts", body, headers)
    await comm.send_input({"type": "http.request", "body": body})
    deadline = time.monotonic() + 2
    while not slow_fake.jobs.busy("tts"):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    await comm.send_input({"type": "http.disconnect"})
    deadline = time.monotonic() + 2
    while await open_records():
        assert time.monotonic() < deadline, "the record stayed open"
        await asyncio.sleep(0.02)
    record = await UsageRecord.objects.aget(request_id="gone")
    # No audio reached the client: nothing is billed (docs/accounting.md).
    assert (record.status, record.tts_chars_in) == ("cancelled", 0)
    assert await chars_used(api_key.account_id) == 0
    assert await lease_free(api_key.account_id)
    await comm.wait(timeout=2)


async def test_tts_h1_revoked_key_stops_a_rest_request(
    slow_fake: WorkerRuntime, keyed: KeyMaker
) -> None:
    api_key, raw = await keyed()
    task = asyncio.create_task(
        post({"text": "r" * 3000}, raw, {"X-Request-Id": "rest-revoked"})
    )
    await revoke_once_busy(slow_fake, api_key, reason="rest")
    response = await asyncio.wait_for(task, 3)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "AUTH_FAILED"
    record = await UsageRecord.objects.aget(request_id="rest-revoked")
    assert (record.status, record.error_code) == ("failed", "key_revoked")
    assert await lease_free(api_key.account_id)


async def test_tts_h1_a_streamed_body_holds_the_lease_until_it_is_sent(
    embedded_worker: WorkerRuntime, keyed: KeyMaker
) -> None:
    api_key, raw = await keyed()
    body = json.dumps({"text": "l" * 9000, "format": "pcm", "sample_rate": 48000})
    headers = {"Content-Type": "application/json", **auth(raw)}
    comm = http("POST", "/v1/tts", body.encode(), headers)
    await comm.send_input({"type": "http.request", "body": body.encode()})
    start = await comm.receive_output(timeout=30)
    assert start["status"] == 200
    part = await comm.receive_output(timeout=5)
    assert part.get("more_body")  # spooled above 8 MiB, sent in parts (H3)
    assert not await lease_free(api_key.account_id)
    while part.get("more_body"):
        part = await comm.receive_output(timeout=5)
    await asyncio.sleep(0.05)
    assert await lease_free(api_key.account_id)
    (record,) = await usage_records(api_key.account_id)
    assert (record.status, record.tts_audio_out_ms) == ("completed", 90_000)


async def test_tts_w7_rest_request_with_auth_off_is_recorded_as_rest(
    embedded_worker: WorkerRuntime, settings: object
) -> None:
    settings.TTS_AUTH_REQUIRED = False  # type: ignore[attr-defined]
    response = await post(
        {"text": TEXT, "format": "pcm", "sample_rate": 24000},
        None,
        {"X-Request-Id": "rest-anon"},
    )
    assert response.status_code == 200
    record = await UsageRecord.objects.select_related("account").aget(
        request_id="rest-anon"
    )
    assert record.account.slug == "anonymous" and record.status == "completed"
    assert record.route == "tts_rest"
