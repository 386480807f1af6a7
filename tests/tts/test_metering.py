"""Usage metering and quotas on ``/v1/tts/ws`` (docs/specs/tts-ws.md §12, K4, I2, Z3; accounts
E8, Q7–Q9, U1–U9), through the real ASGI application and the embedded worker
with the fake engine (10 ms of tone per character). Limits run on MemoryLimiter and, under the
``redis`` marker, on RedisLimiter."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from accounts.models.usage import UsageRecord
from tests.conftest import KeyMaker
from tests.tts.conftest import (
    Opener,
    Stream,
    bearer,
    chars_used,
    lease_free,
    open_records,
    pcm_ms,
    usage_records,
)
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)

RATE = 16000
TEXT = "Hello world. How are you today?"  # 31 chars → 310 ms of fake audio


def request(text: str, **fields: Any) -> dict[str, Any]:
    return {"text": text, "format": "pcm", "sample_rate": RATE, **fields}


def audio_frames(stream: Stream) -> list[bytes]:
    return stream.log.frames  # pcm: no header frame


def assert_matches_complete(record: UsageRecord, complete: dict[str, Any]) -> None:
    """E5 / U4: the record's timing and audio equal the complete event's values; a
    completed request bills all its characters (docs/accounting.md)."""
    metrics = complete["metrics"]
    assert record.request_id == complete["request_id"]
    if not metrics["cancelled"]:
        assert record.tts_chars_in == metrics["text_chars"]
    assert round(record.tts_audio_out_ms / 1000, 2) == pytest.approx(
        metrics["audio_duration_seconds"], abs=0.011
    )
    if metrics["audio_duration_seconds"]:
        assert (record.ttfb_ms, record.rtf) == (metrics["ttfb_ms"], metrics["rtf"])
    else:  # E3's 0 means "none": the record holds null, so rollups skip it
        assert (record.ttfb_ms, record.rtf) == (None, None)


async def connect(open_stream: Opener, raw: str) -> Stream:
    return await open_stream(headers=bearer(raw))


# U1, accounts U2: one record per request, committed before the first binary frame.


async def test_tts_u1_u2_record_is_committed_before_the_first_binary_frame(
    limits_backend: str, embedded_worker: WorkerRuntime, keyed: KeyMaker, open_stream
) -> None:
    api_key, raw = await keyed()
    stream = await connect(open_stream, raw)
    await stream.send({"text": TEXT, "request_id": "u2-first"})  # wav: header frame
    kind, frame = await stream.until(lambda item: item[0] == "bytes")
    assert kind == "bytes" and len(frame) == 44
    record = await UsageRecord.objects.aget(request_id="u2-first")
    header = stream.log.named("header")[0]
    assert record.status == "started"
    assert (record.account_id, record.api_key_id) == (api_key.account_id, api_key.id)
    assert (record.endpoint, record.model) == ("tts", header["model_version"])
    assert await stream.closed() == 1000
    record = await UsageRecord.objects.aget(request_id="u2-first")
    assert (record.status, record.close_code, record.error_code) == (
        "completed",
        1000,
        "",
    )
    assert_matches_complete(record, stream.log.named("complete")[0])
    assert record.tts_audio_out_ms == 310
    assert await chars_used(api_key.account_id) == len(TEXT)


async def test_tts_w7_u1_auth_off_meters_to_the_anonymous_key(
    embedded_worker: WorkerRuntime, open_stream: Opener, settings: Any
) -> None:
    settings.TTS_AUTH_REQUIRED = False
    stream = await open_stream(headers=[])
    await stream.send(request(TEXT, request_id="anon-1"))
    assert await stream.closed() == 1000
    record = await UsageRecord.objects.select_related("account").aget(
        request_id="anon-1"
    )
    assert record.account.slug == "anonymous" and record.status == "completed"
    assert_matches_complete(record, stream.log.named("complete")[0])


async def test_tts_k3_u1_each_keep_alive_request_has_its_own_record(
    embedded_worker: WorkerRuntime, keyed: KeyMaker, open_stream: Opener
) -> None:
    api_key, raw = await keyed()
    stream = await connect(open_stream, raw)
    for i, text in enumerate(("First one.", "The second request.")):
        await stream.send(request(text, keep_alive=i == 0, request_id=f"ka-{i}"))
        await stream.event("complete")
    assert await stream.closed() == 1000
    records = await usage_records(api_key.account_id)
    assert [r.request_id for r in records] == ["ka-0", "ka-1"]
    assert records[0].stream_id == records[1].stream_id
    assert [r.close_code for r in records] == [None, 1000]
    for record, complete in zip(records, stream.log.named("complete"), strict=True):
        assert record.status == "completed"
        assert_matches_complete(record, complete)
    assert pcm_ms(audio_frames(stream), RATE) == sum(
        r.tts_audio_out_ms for r in records
    )


# U3, U4: status and totals on each exit path of Z3.


async def exit_path(path: str, stream: Stream, runtime: WorkerRuntime) -> None:
    """Drive ``stream`` down one exit path."""
    engine = runtime.engines["tts"].engine
    if path == "complete":
        await stream.send(request(TEXT))
        await stream.closed()
    elif path == "cancel-before-audio":
        engine.chunk_delay_s = 5
        await stream.send(request("c" * 300))
        await stream.event("header")
        await stream.send({"event": "cancel"})
        await stream.closed()
    elif path in ("cancel-mid-stream", "disconnect-mid-stream"):
        engine.chunk_delay_s = 0.02
        await stream.send(request("c" * 1000))
        for _ in range(3):
            await stream.until(lambda item: item[0] == "bytes")
        if path == "cancel-mid-stream":
            await stream.send({"event": "cancel"})
            await stream.closed()
        else:
            await stream.comm.disconnect()
            stream.drain()
    elif path == "worker-error-mid-stream":
        original = engine.stream

        async def broken(req: Any) -> Any:
            count = 0
            async for pcm in original(req):
                yield pcm
                count += 1
                if count == 3:
                    raise RuntimeError("engine broke")

        engine.stream = broken
        await stream.send(request("e" * 1000))
        await stream.closed()
    elif path == "worker-lost":
        runtime.jobs.heartbeat_s = 60
        engine.chunk_delay_s = 10
        await stream.send(request("l" * 100))
        await stream.closed()


# path → (status, error_code, close_code, characters billed). Only a completed request
# bills its text: every other path ends inside the first segment (200 characters of 20
# chunks), whose audio never all reached the client (docs/accounting.md).
EXPECTED = {
    "complete": ("completed", "", 1000, 31),
    "cancel-before-audio": ("cancelled", "", 1000, 0),
    "cancel-mid-stream": ("cancelled", "", 1000, 0),
    "disconnect-mid-stream": ("cancelled", "", 1000, 0),
    "worker-error-mid-stream": ("failed", "internal_error", 1011, 0),
    "worker-lost": ("failed", "model_not_loaded", 1011, 0),
}


@pytest.mark.parametrize("path", list(EXPECTED))
async def test_tts_u3_u4_record_quota_and_complete_agree_on_each_exit_path(
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    open_stream: Opener,
    settings: Any,
    path: str,
) -> None:
    settings.TTS_WORKER_STALL_S = 0.4
    api_key, raw = await keyed({"monthly_tts_characters": 100_000})
    stream = await connect(open_stream, raw)
    await exit_path(path, stream, embedded_worker)
    (record,) = await usage_records(api_key.account_id)
    status, error_code, close_code, chars = EXPECTED[path]
    assert (record.status, record.error_code, record.close_code) == (
        status,
        error_code,
        close_code,
    )
    assert record.tts_chars_in == chars
    assert record.tts_audio_out_ms == pcm_ms(audio_frames(stream), RATE)
    completes = stream.log.named("complete")
    if completes:
        assert_matches_complete(record, completes[0])
    elif record.tts_audio_out_ms:
        assert record.ttfb_ms is not None and record.rtf is not None
    assert await chars_used(api_key.account_id) == record.tts_chars_in  # accounts Q3
    assert await open_records() == 0
    assert await lease_free(api_key.account_id)


async def test_tts_u3_q9_overloaded_at_admission_charges_nothing(
    slow_fake: WorkerRuntime,
    keyed: KeyMaker,
    open_stream: Opener,
    settings: Any,
) -> None:
    settings.TTS_ADMISSION_WAIT_MS = 200
    slow_fake.jobs.slots["tts"] = 1
    api_key, raw = await keyed({"monthly_tts_characters": 5000})
    holder = await connect(open_stream, raw)
    await holder.send(request("h" * 2000))
    await holder.event("header")
    refused = await connect(open_stream, raw)
    await refused.send(request("r" * 2900, request_id="refused"))
    assert (await refused.event("error"))["error"]["code"] == "STREAMING_OVERLOADED"
    assert await refused.closed() == 1013
    record = await UsageRecord.objects.aget(request_id="refused")
    assert (record.status, record.error_code, record.tts_chars_in) == (
        "failed",
        "streaming_overloaded",
        0,
    )
    await holder.send({"event": "cancel"})
    await holder.event("complete")
    # Neither delivered a whole segment, so neither bills (docs/accounting.md), and both
    # reservations went back to the mirror (accounts Q9): the whole 5000 characters fit
    # again.
    assert await chars_used(api_key.account_id) == 0
    again = await connect(open_stream, raw)
    await again.send(request("a" * 5000))
    await again.event("header")
    await again.send({"event": "cancel"})
    await again.event("complete")
    assert await chars_used(api_key.account_id) == 0


# accounts Q7, tts I2: quota before audio, and quota running out mid-stream.


async def test_tts_q7_text_over_quota_is_refused_before_audio(
    limits_backend: str,
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    open_stream: Opener,
) -> None:
    api_key, raw = await keyed({"monthly_tts_characters": 50})
    stream = await connect(open_stream, raw)
    await stream.send(request("q" * 60))
    error = (await stream.event("error"))["error"]
    assert (error["code"], error["message"], error["fatal"]) == (
        "QUOTA_EXCEEDED",
        "Quota exceeded",
        True,
    )
    assert await stream.closed() == 1008
    assert "header" not in stream.log.kinds() and not stream.log.frames
    assert [r.tts_chars_in for r in await usage_records(api_key.account_id)] in (
        [],
        [0],
    )
    assert await chars_used(api_key.account_id) == 0
    assert await lease_free(api_key.account_id)  # released at the server's close


async def test_tts_q7_keep_alive_stream_runs_out_of_quota(
    limits_backend: str,
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    open_stream: Opener,
) -> None:
    api_key, raw = await keyed({"monthly_tts_characters": 100})
    stream = await connect(open_stream, raw)
    await stream.send(request("a" * 60, keep_alive=True))
    await stream.event("complete")
    await stream.send(request("b" * 60, keep_alive=True))
    error = (await stream.event("error"))["error"]
    assert error["code"] == "QUOTA_EXCEEDED" and error["fatal"] is True
    assert await stream.closed() == 1008
    records = [r for r in await usage_records(api_key.account_id) if r.tts_chars_in]
    assert [(r.status, r.tts_chars_in) for r in records] == [("completed", 60)]
    assert records[0].tts_audio_out_ms == pcm_ms(audio_frames(stream), RATE) == 600
    assert await chars_used(api_key.account_id) == 60
    # What is left still serves, exactly to the limit; then admission refuses (accounts Q6).
    rest = await connect(open_stream, raw)
    await rest.send(request("c" * 40))
    assert await rest.closed() == 1000
    assert await chars_used(api_key.account_id) == 100
    refused = await connect(open_stream, raw)
    assert (await refused.event("error"))["error"]["code"] == "QUOTA_EXCEEDED"
    assert await refused.closed() == 1008


async def test_tts_i2_incremental_text_over_quota_stops_the_stream(
    limits_backend: str,
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    open_stream: Opener,
) -> None:
    api_key, raw = await keyed({"monthly_tts_characters": 100})
    stream = await connect(open_stream, raw)
    await stream.send(
        {"event": "start", "request_id": "inc", "format": "pcm", "sample_rate": RATE}
    )
    await stream.event("header")
    first = "Forty characters of text, said at once."
    await stream.send({"event": "text", "text": first})
    await stream.send({"event": "flush"})
    await stream.event("flushed")
    await stream.send({"event": "text", "text": "x" * 70})
    error = (await stream.event("error"))["error"]
    assert (error["code"], error["request_id"]) == ("QUOTA_EXCEEDED", "inc")
    assert await stream.closed() == 1008
    record = await UsageRecord.objects.aget(request_id="inc")
    assert (record.status, record.error_code, record.close_code) == (
        "failed",
        "quota_exceeded",
        1008,
    )
    assert record.tts_chars_in == len(first)
    assert record.tts_audio_out_ms == pcm_ms(audio_frames(stream), RATE) > 0
    assert await chars_used(api_key.account_id) == len(first)


# K4 / accounts E8: each request after the first takes an RPM token.


async def test_tts_k4_each_further_request_takes_an_rpm_token(
    limits_backend: str,
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    open_stream: Opener,
) -> None:
    api_key, raw = await keyed({"requests_per_minute": 2})
    stream = await connect(open_stream, raw)  # token 1 (admission)
    await stream.send(request("One.", keep_alive=True))  # the first request: no token
    await stream.event("complete")
    await stream.send(request("Two.", keep_alive=True))  # token 2
    await stream.event("complete")
    await stream.send(request("Three.", keep_alive=True, request_id="third"))
    error = (await stream.event("error"))["error"]
    assert (error["code"], error["fatal"], error["request_id"]) == (
        "RATE_LIMIT_EXCEEDED",
        False,
        "third",
    )
    assert 1 <= error["retry_after_ms"] <= 60_000
    await stream.send({"event": "ping"})
    await stream.event("pong")  # K4: the stream stays open
    records = await usage_records(api_key.account_id)
    assert [r.status for r in records] == ["completed", "completed", "failed"]
    # The refused request leaves a record of its own (issue 30): no units, no close.
    refused = records[-1]
    assert (refused.request_id, refused.error_code, refused.close_code) == (
        "third",
        "rate_limited",
        None,
    )
    assert (refused.tts_chars_in, refused.tts_audio_out_ms) == (0, 0)


# Z3: every exit releases the lease and leaves no open record.


async def test_tts_z3_open_cancel_close_cycles_leave_no_lease_and_no_open_record(
    limits_backend: str,
    slow_fake: WorkerRuntime,
    keyed: KeyMaker,
    open_stream: Opener,
) -> None:
    api_key, raw = await keyed({"max_concurrent_streams": 1})
    before = (await open_records(), await lease_free(api_key.account_id))
    assert before == (0, True)
    for i in range(20):
        stream = await connect(open_stream, raw)
        await stream.send(request("w" * 500, keep_alive=i % 2 == 0))
        if i % 3:
            await stream.event("header")
        await stream.send({"event": "cancel"})
        await stream.event("complete")
        if (
            i % 2
        ):  # the gateway closed (legacy): the lease is free before the client goes
            assert await stream.closed() == 1000
            assert await lease_free(api_key.account_id)
        await stream.comm.disconnect()
        assert (await open_records(), await lease_free(api_key.account_id)) == before
    records = await usage_records(api_key.account_id)
    assert len(records) == 20 and {r.status for r in records} == {"cancelled"}
    assert await chars_used(api_key.account_id) == sum(r.tts_chars_in for r in records)


async def test_tts_z3_tick_task_is_cancelled_on_disconnect(
    embedded_worker: WorkerRuntime, keyed: KeyMaker, open_stream: Opener
) -> None:
    _, raw = await keyed()
    before = {t for t in asyncio.all_tasks() if not t.done()}
    stream = await connect(open_stream, raw)
    await stream.send({"event": "ping"})
    await stream.event("pong")
    await stream.comm.disconnect()
    await asyncio.sleep(0.05)
    left = {t for t in asyncio.all_tasks() if not t.done()} - before
    assert not [t for t in left if "Ticker" in repr(t.get_coro())]
