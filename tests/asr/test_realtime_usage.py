"""Usage metering and quota of /v1/realtime (§12 MT-1 to MT-4, AU-4, LM-4 to LM-6, WK-1).

Records, counters and quota are read back through the accounts models; plans, accounts and keys
are made through the accounts services. The fake engine transcribes N whole seconds as N words,
so digital silence with trimming off is enough to make items.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import DatabaseError

from accounts.limits import get_limiter
from accounts.models.api_keys import ApiKey
from accounts.models.plans import Plan, default_allowed_endpoints
from accounts.models.quota import QuotaCounter
from accounts.models.usage import UsageRecord
from tests.asr.conftest import Realtime, b64, connect, silence
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)

COMMIT = {"type": "input_audio_buffer.commit"}
COMPLETED = "conversation.item.input_audio_transcription.completed"
MakeKey = Callable[..., Awaitable[tuple[ApiKey, str]]]


@pytest.fixture
def keyed(transactional_db: None) -> MakeKey:
    """``await keyed(**plan_fields)``: a fresh account and key on its own plan."""

    @database_sync_to_async
    def make(**plan_fields: Any) -> tuple[ApiKey, str]:
        from accounts.services.accounts import account_get_or_create
        from accounts.services.api_keys import api_key_create

        fields: dict[str, Any] = {
            "requests_per_minute": 600,
            "max_concurrent_streams": 4,
            "monthly_tts_characters": None,
            "monthly_asr_seconds": None,
            "max_session_seconds": 3600,
            "allowed_endpoints": default_allowed_endpoints(),
            **plan_fields,
        }
        plan = Plan.objects.create(name=f"plan-{uuid.uuid4().hex[:8]}", **fields)
        account = account_get_or_create(name=f"acct-{uuid.uuid4().hex[:8]}", plan=plan)
        return api_key_create(
            account=account, name="test", actor=None, actor_label="tests"
        )

    return make


def recording(kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    """Messages of ``kinds`` that the gateway sends on the channel layer, as they go."""
    layer = get_channel_layer()
    sent: list[dict[str, Any]] = []
    original = layer.send

    async def send(channel: str, message: dict[str, Any]) -> None:
        if message["type"] in kinds:
            sent.append(message)
        await original(channel, message)

    layer.send = send
    return sent


async def record_of(rt: Realtime) -> UsageRecord:
    """The usage record of the connection (its request id is the session id)."""
    created = next(e for e in rt.frames if e["type"] == "session.created")
    return await UsageRecord.objects.aget(request_id=created["session"]["id"])


def lease_free(account_id: int) -> bool:
    """True when the account holds no concurrency lease (probe with a limit of 1)."""
    limiter = get_limiter()
    decision = limiter.acquire_lease(
        member="probe", account_id=account_id, account_limit=1, ttl_ms=1000
    )
    if decision.allowed:
        limiter.release_lease(member="probe", account_id=account_id)
    return decision.allowed


async def quota_used(account_id: int) -> int:
    counters = QuotaCounter.objects.filter(account_id=account_id, metric="asr_audio_ms")
    return sum([c.used async for c in counters])


async def stopped(rt: Realtime) -> tuple[dict[str, Any], int]:
    """The one error event of a server-side stop and the close code."""
    events, close = await rt.closed(timeout=5)
    assert [e["type"] for e in events] == ["error"], events
    return events[0]["error"], close["code"]


# MT-1, AU-4, WK-1: the record is committed before session.created.


async def test_mt1_record_is_committed_before_session_created(
    embedded_worker: object, keyed: MakeKey
) -> None:
    opens = recording(("asr.job.open",))
    api_key, raw = await keyed()
    rt = await connect(key=raw, created=False)
    created = await rt.recv()
    assert created["type"] == "session.created"
    # Read as soon as session.created arrives, from the test's own connection.
    record = await UsageRecord.objects.aget(request_id=created["session"]["id"])
    assert record.status == "started"
    assert (record.account_id, record.api_key_id) == (api_key.account_id, api_key.id)
    assert (record.endpoint, record.model) == ("asr", "fake/words.en")
    assert [m["job_id"] for m in opens] == [str(record.stream_id)]  # WK-1
    await rt.comm.disconnect()


async def test_au4_usage_unavailable_is_one_error_and_gives_everything_back(
    embedded_worker: WorkerRuntime, keyed: MakeKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accounts import metering

    def refuse(**kwargs: Any) -> None:
        raise DatabaseError("database is down")

    monkeypatch.setattr(metering, "usage_open", refuse)
    api_key, raw = await keyed()
    rt = await connect(key=raw, created=False)
    error, code = await stopped(rt)
    assert (error["type"], error["code"], code) == (
        "server_error",
        "usage_unavailable",
        1011,
    )
    assert await database_sync_to_async(lease_free)(api_key.account_id)
    deadline = time.monotonic() + 1
    while embedded_worker.jobs.busy("asr") and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert embedded_worker.jobs.busy("asr") == 0
    # No usage record opened: the refusal alone is recorded, with no units (issue 30).
    (record,) = [r async for r in UsageRecord.objects.all()]
    assert (record.status, record.error_code, record.close_code) == (
        "failed",
        "usage_unavailable",
        1011,
    )
    assert record.asr_audio_in_ms == 0
    await rt.comm.disconnect()


# MT-2: every accepted millisecond, floored on the running total.


@pytest.mark.parametrize(
    ("fmt", "rate", "width"), [("audio/pcm", 24000, 2), ("audio/pcmu", 8000, 1)]
)
async def test_mt2_accepted_audio_is_metered_exactly(
    embedded_worker: object, keyed: MakeKey, fmt: str, rate: int, width: int
) -> None:
    api_key, raw = await keyed()
    rt = await connect(key=raw)
    if fmt != "audio/pcm":
        await rt.send(
            {
                "type": "session.update",
                "session": {
                    "type": "transcription",
                    "audio": {"input": {"format": {"type": fmt}}},
                },
            }
        )
        assert (await rt.recv())["type"] == "session.updated"
    samples = 0
    for n in (1, 7, 333, 4801, 12_345, 24_001, 3):  # ms of each piece is not whole
        await rt.send(
            {"type": "input_audio_buffer.append", "audio": b64(bytes(n * width))}
        )
        samples += n
    await rt.send({"type": "input_audio_buffer.append", "audio": ""})
    await rt.send({"type": "input_audio_buffer.append", "audio": "not base64!"})
    assert (await rt.recv())["error"]["code"] == "invalid_audio"  # not metered
    await rt.comm.disconnect()
    record = await record_of(rt)
    assert record.asr_audio_in_ms == samples * 1000 // rate
    assert (record.status, record.close_code, record.error_code) == (
        "completed",
        1000,
        "",
    )
    assert await quota_used(api_key.account_id) == record.asr_audio_in_ms


async def test_mt2_checkpoints_run_on_the_tick(
    embedded_worker: object, keyed: MakeKey, settings: Any
) -> None:
    settings.USAGE_CHECKPOINT_SECONDS = 0.2
    _, raw = await keyed()
    rt = await connect(key=raw)
    await rt.append(silence(1.0))
    record = await record_of(rt)
    deadline = time.monotonic() + 3
    while record.asr_audio_in_ms < 1000 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        await record.arefresh_from_db()
    assert (record.status, record.asr_audio_in_ms) == ("started", 1000)
    assert record.checkpoint_seq >= 1
    await rt.comm.disconnect()


# MT-3: reservations with partial grants.


async def test_mt2_an_append_that_overflows_is_not_metered(
    embedded_worker: object, keyed: MakeKey, fast_vad_settings: Any
) -> None:
    """AI-1 step 6: the append that passes ``ASR_MAX_BUFFER_S`` closes 1009 and stays
    out of ``asr_audio_in_ms``; the appends before it are metered."""
    fast_vad_settings.ASR_MAX_BUFFER_S = 1
    api_key, raw = await keyed()
    rt = await connect(key=raw)
    for _ in range(2):  # one append of 600 ms each
        await rt.append(silence(0.6), chunk_bytes=48_000)
    error, code = await stopped(rt)
    assert (error["code"], code) == ("buffer_overflow", 1009)
    record = await record_of(rt)
    assert (record.status, record.asr_audio_in_ms) == ("failed", 600)
    assert await quota_used(api_key.account_id) == 600


@pytest.mark.parametrize(
    "backend", ["memory", pytest.param("redis", marks=pytest.mark.redis)]
)
async def test_mt3_quota_runs_out_mid_session(
    embedded_worker: object,
    keyed: MakeKey,
    fast_vad_settings: Any,
    request: pytest.FixtureRequest,
    backend: str,
) -> None:
    settings = fast_vad_settings
    if backend == "redis":
        settings.REDIS_URL = request.getfixturevalue("redis_url")
        settings.REDIS_KEY_PREFIX = f"t{uuid.uuid4().hex[:8]}:"
    settings.ASR_QUOTA_CHUNK_MS = 400
    audio = recording(("asr.job.audio",))
    api_key, raw = await keyed(monthly_asr_seconds=1)
    rt = await connect(key=raw)
    # 300 ms appends: grants of 400, 400, 200, then 0 with 100 ms of the 4th append left.
    for _ in range(5):
        await rt.append(silence(0.3), chunk_bytes=14_400)
    error, code = await stopped(rt)
    assert (error["type"], error["code"], code) == (
        "insufficient_quota",
        "insufficient_quota",
        1008,
    )
    record = await record_of(rt)
    assert (record.status, record.error_code, record.close_code) == (
        "failed",
        "quota_exceeded",
        1008,
    )
    assert record.asr_audio_in_ms == 1000  # what was granted, not the 1500 ms sent
    assert await quota_used(api_key.account_id) == 1000
    assert 0 < sum(len(m["pcm"]) for m in audio) <= 2 * 16000  # the rest never left
    await rt.comm.disconnect()
    again = await connect(key=raw, created=False)  # accounts Q6: nothing remains
    error, code = await stopped(again)
    assert (error["code"], code) == ("insufficient_quota", 1008)
    await again.comm.disconnect()


# LM-5, accounts E7: stops mid-session.


async def test_lm5_revoked_key_stops_within_a_second_and_fails_the_record(
    embedded_worker: object, keyed: MakeKey
) -> None:
    from accounts.services.api_keys import api_key_revoke

    api_key, raw = await keyed()
    rt = await connect(key=raw)
    await rt.append(silence(0.5))
    await rt.quiet(0.1)
    await database_sync_to_async(api_key_revoke)(
        api_key=api_key, actor=None, reason="test", actor_label="tests"
    )
    revoked = time.monotonic()
    error, code = await stopped(rt)
    assert time.monotonic() - revoked < 1.2
    assert (error["code"], error["message"], code) == (
        "invalid_api_key",
        "Incorrect API key provided.",
        1008,
    )
    record = await record_of(rt)
    assert (record.status, record.error_code, record.close_code) == (
        "failed",
        "key_revoked",
        1008,
    )
    assert record.asr_audio_in_ms == 500
    assert await database_sync_to_async(lease_free)(api_key.account_id)
    await rt.comm.disconnect()


@pytest.mark.parametrize(
    ("reason", "wire_type", "wire_code", "close"),
    [
        ("key_revoked", "invalid_request_error", "invalid_api_key", 1008),
        ("max_session_duration", "invalid_request_error", "session_expired", 1000),
        ("quota_exceeded", "insufficient_quota", "insufficient_quota", 1008),
        ("lease_lost", "server_error", "lease_lost", 1011),
        ("usage_unavailable", "server_error", "usage_unavailable", 1011),
    ],
)
async def test_lm5_every_stop_reason_maps_to_its_error_and_record(
    embedded_worker: object,
    keyed: MakeKey,
    monkeypatch: pytest.MonkeyPatch,
    reason: str,
    wire_type: str,
    wire_code: str,
    close: int,
) -> None:
    from asr.usage import RealtimeUsage

    async def tick(self: RealtimeUsage) -> str:
        return reason

    _, raw = await keyed()
    rt = await connect(key=raw)
    monkeypatch.setattr(RealtimeUsage, "tick", tick)
    error, code = await stopped(rt)
    assert (error["type"], error["code"], code) == (wire_type, wire_code, close)
    record = await record_of(rt)
    assert (record.status, record.error_code, record.close_code) == (
        "failed",
        reason,
        close,
    )
    await rt.comm.disconnect()


async def test_lm3_lm4_idle_completes_and_expiry_fails_the_record(
    embedded_worker: object, keyed: MakeKey, settings: Any
) -> None:
    settings.ASR_IDLE_TIMEOUT_S = 0.3
    _, raw = await keyed()
    rt = await connect(key=raw)
    error, code = await stopped(rt)
    assert (error["code"], code) == ("idle_timeout", 1000)
    record = await record_of(rt)
    assert (record.status, record.error_code, record.close_code) == (
        "completed",
        "",
        1000,
    )
    await rt.comm.disconnect()
    settings.ASR_IDLE_TIMEOUT_S = 0
    settings.ASR_MAX_SESSION_S = 1  # the gateway's limit, shorter than the plan's
    rt = await connect(key=raw)
    error, code = await stopped(rt)
    assert (error["code"], code) == ("session_expired", 1000)
    record = await record_of(rt)
    assert (record.status, record.error_code) == ("failed", "session_expired")
    await rt.comm.disconnect()


# LM-6: client close.


async def test_lm6_disconnect_finalizes_the_record_and_frees_the_lease(
    embedded_worker: object, keyed: MakeKey
) -> None:
    api_key, raw = await keyed(max_concurrent_streams=1)
    rt = await connect(key=raw)
    await rt.append(silence(0.25))
    await rt.quiet(0.1)
    assert not await database_sync_to_async(lease_free)(api_key.account_id)
    await rt.comm.disconnect(code=1001)
    record = await record_of(rt)
    assert (record.status, record.close_code, record.asr_audio_in_ms) == (
        "completed",
        1001,
        250,
    )
    assert record.ended_at is not None
    assert await database_sync_to_async(lease_free)(api_key.account_id)
    again = await connect(key=raw)  # admitted at the limit of 1
    await again.comm.disconnect()


async def test_lm6_gateway_shutdown_completes_the_record_with_1001(
    embedded_worker: object, keyed: MakeKey
) -> None:
    from gateway.server import lifecycle

    api_key, raw = await keyed()
    rt = await connect(key=raw)
    await rt.append(silence(0.25))
    await rt.quiet(0.1)  # the appends are handled before the notice arrives
    drain = asyncio.create_task(lifecycle.drain(2.0))
    events, close = await rt.closed(timeout=5)
    assert (events, close["code"]) == ([], 1001)
    record = await record_of(rt)
    assert (record.status, record.close_code, record.asr_audio_in_ms) == (
        "completed",
        1001,
        250,
    )
    assert await database_sync_to_async(lease_free)(api_key.account_id)
    await rt.comm.disconnect()
    assert await drain == 0


# MT-4: items, characters and latency.


async def test_mt4_items_chars_and_latency_are_counted(
    embedded_worker: object, keyed: MakeKey, fast_vad_settings: Any
) -> None:
    _, raw = await keyed()
    rt = await connect(key=raw)
    started = time.monotonic()
    transcripts = []
    for seconds in (2.5, 1.2):
        await rt.append(silence(seconds))
        await rt.send(COMMIT)
        events = await rt.until(COMPLETED)
        transcripts.append(events[-1]["transcript"])
    elapsed_ms = (time.monotonic() - started) * 1000
    await rt.comm.disconnect()
    assert [len(t.split()) for t in transcripts] == [2, 1]
    record = await record_of(rt)
    assert record.asr_items == 2
    assert record.asr_chars_out == sum(len(t) for t in transcripts)
    assert record.asr_audio_in_ms == 3700
    assert 0 < record.asr_latency_ms_max <= record.asr_latency_ms_sum <= elapsed_ms


# Without an admission the anonymous key is metered.


async def test_mt1_without_admission_the_anonymous_key_is_metered(
    embedded_worker: object, monkeypatch: pytest.MonkeyPatch, transactional_db: None
) -> None:
    from asr.consumers import RealtimeConsumer

    async def no_admission(self: RealtimeConsumer) -> None:
        return None

    monkeypatch.setattr(RealtimeConsumer, "admit", no_admission)
    opens = recording(("asr.job.open",))
    rt = await connect()
    await rt.append(silence(0.5))
    await rt.comm.disconnect()
    record = await record_of(rt)
    key = await ApiKey.objects.select_related("account").aget(pk=record.api_key_id)
    assert key.account.slug == "anonymous"
    assert (record.status, record.asr_audio_in_ms) == ("completed", 500)
    assert [m["job_id"] for m in opens] == [str(record.stream_id)]
