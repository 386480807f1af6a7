"""Mid-stream stops of ``/v1/tts/ws`` (accounts E6, E7; docs/specs/tts-ws.md §6, W12, Z3): the
per-stream tick, a revoked key, the maximum session length, a lost lease and gateway
shutdown, through the real ASGI application and the embedded worker with the fake engine."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from channels.db import database_sync_to_async

from accounts.admission import Admission
from accounts.limits import get_limiter
from accounts.models.api_keys import ApiKey
from accounts.models.usage import UsageRecord
from accounts.services.api_keys import api_key_revoke
from gateway.link.timers import Ticker
from tests.conftest import KeyMaker
from tests.tts.conftest import (
    Opener,
    chars_used,
    delivered_chars,
    lease_free,
    open_records,
    pcm_ms,
    usage_records,
)
from tests.tts.test_metering import RATE, TEXT, audio_frames, connect, request
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)


# accounts E6, E7: the per-stream tick stops a running stream.


async def test_tts_e7_revoked_key_stops_a_running_stream_within_a_second(
    limits_backend: str, slow_fake: WorkerRuntime, keyed: KeyMaker, open_stream
) -> None:
    api_key, raw = await keyed()
    stream = await connect(open_stream, raw)
    await stream.send(request("r" * 3000, request_id="revoked", timestamps=True))
    for _ in range(3):
        await stream.until(lambda item: item[0] == "bytes")
    revoked_at = time.monotonic()
    await database_sync_to_async(api_key_revoke)(
        api_key=await ApiKey.objects.aget(pk=api_key.pk), actor=None, reason="test"
    )
    error = (await stream.event("error"))["error"]
    stopped_s = time.monotonic() - revoked_at
    assert (error["code"], error["message"]) == ("AUTH_FAILED", "Invalid API key")
    assert await stream.closed() == 1008
    print(f"\nrevoked key: stream stopped after {stopped_s:.3f} s")
    assert stopped_s < 1.2, f"stopped after {stopped_s:.3f} s"
    kinds = stream.log.kinds()
    assert kinds[kinds.index("error") :] == ["error", "close"]
    record = await UsageRecord.objects.aget(request_id="revoked")
    assert (record.status, record.error_code, record.close_code) == (
        "failed",
        "key_revoked",
        1008,
    )
    assert record.tts_audio_out_ms == pcm_ms(audio_frames(stream), RATE)
    # Billed: the segments whose last frame reached the client (docs/accounting.md).
    chars = delivered_chars(stream.log)
    assert record.tts_chars_in == chars == await chars_used(api_key.account_id)
    assert await lease_free(api_key.account_id)


async def test_tts_e7_maximum_session_length_is_timeout_1008(
    slow_fake: WorkerRuntime,
    keyed: KeyMaker,
    open_stream: Opener,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api_key, raw = await keyed()
    stream = await connect(open_stream, raw)
    await stream.send(request("m" * 3000, request_id="long"))
    await stream.until(lambda item: item[0] == "bytes")
    monkeypatch.setattr(Admission, "session_expired", property(lambda self: True))
    error = (await stream.event("error"))["error"]
    assert error["code"] == "TIMEOUT" and error["fatal"] is True
    assert await stream.closed() == 1008
    record = await UsageRecord.objects.aget(request_id="long")
    assert (record.status, record.error_code) == ("failed", "max_session_duration")
    assert record.tts_audio_out_ms == pcm_ms(audio_frames(stream), RATE)


async def test_tts_e7_lost_lease_is_internal_error_1011(
    limits_backend: str,
    slow_fake: WorkerRuntime,
    keyed: KeyMaker,
    open_stream: Opener,
    settings: Any,
) -> None:
    settings.LEASE_RENEW_SECONDS = 0.2
    api_key, raw = await keyed()
    stream = await connect(open_stream, raw)
    await stream.send(request("z" * 3000, request_id="leased"))
    await stream.until(lambda item: item[0] == "bytes")
    record = await UsageRecord.objects.aget(request_id="leased")
    await asyncio.to_thread(
        get_limiter().release_lease,
        member=str(record.stream_id),
        account_id=api_key.account_id,
    )
    error = (await stream.event("error"))["error"]
    assert error["code"] == "INTERNAL_ERROR"
    assert await stream.closed() == 1011
    record = await UsageRecord.objects.aget(request_id="leased")
    assert (record.status, record.error_code) == ("failed", "lease_lost")


async def test_tts_e6_idle_keep_alive_stream_is_checked_too(
    embedded_worker: WorkerRuntime, keyed: KeyMaker, open_stream: Opener
) -> None:
    api_key, raw = await keyed()
    stream = await connect(open_stream, raw)
    await stream.send(request(TEXT, keep_alive=True))
    await stream.event("complete")
    await database_sync_to_async(api_key_revoke)(
        api_key=await ApiKey.objects.aget(pk=api_key.pk), actor=None, reason="idle"
    )
    assert (await stream.event("error"))["error"]["code"] == "AUTH_FAILED"
    assert await stream.closed() == 1008
    assert [r.status for r in await usage_records(api_key.account_id)] == ["completed"]


async def test_tts_u5_long_request_is_checkpointed(
    slow_fake: WorkerRuntime, keyed: KeyMaker, open_stream: Opener, settings: Any
) -> None:
    settings.USAGE_CHECKPOINT_SECONDS = 0.3
    api_key, raw = await keyed()
    stream = await connect(open_stream, raw)
    await stream.send(request("k" * 3000, request_id="ckpt"))
    await stream.event("header")
    await asyncio.sleep(1.2)
    record = await UsageRecord.objects.aget(request_id="ckpt")
    assert record.status == "started" and record.checkpoint_seq >= 2
    # The checkpoint holds what was delivered so far: whole 200-character segments.
    assert record.tts_chars_in % 200 == 0 and record.tts_audio_out_ms > 0
    assert await chars_used(api_key.account_id) == record.tts_chars_in
    await stream.send({"event": "cancel"})
    await stream.closed()


async def test_tts_q5_ticker_keeps_one_tick_in_the_channel_and_stops() -> None:
    posted: list[bool] = []

    async def post(name: str) -> bool:
        posted.append(len(posted) > 0)  # the first send finds the channel full
        return posted[-1]

    ticker = Ticker(post, "tick", 0.01)
    ticker.start()
    await asyncio.sleep(0.08)
    assert posted == [False, True]  # re-posted after a full channel, then waits
    ticker.ticked()
    await asyncio.sleep(0.03)
    assert len(posted) == 3
    await ticker.stop()
    ticker.ticked()
    await asyncio.sleep(0.03)
    assert len(posted) == 3


async def test_a_tick_whose_post_fails_leaves_the_ticker_running() -> None:
    """A channel layer that raises (Redis restarting) costs one tick, not the stream's
    checkpoints, journal notes and lease renewals for good (issue 30)."""
    posted: list[str] = []

    async def post(name: str) -> bool:
        posted.append(name)
        if len(posted) == 1:
            raise ConnectionError("Connection closed by server.")
        return True

    ticker = Ticker(post, "tick", 0.01)
    ticker.start()
    await asyncio.sleep(0.08)
    assert len(posted) == 2  # the failed post, then one that waits to be handled
    await ticker.stop()


# W12: gateway shutdown is an exit path too (Z3).


async def test_tts_w12_shutdown_drains_then_fails_the_request_with_1001(
    slow_fake: WorkerRuntime, keyed: KeyMaker, open_stream: Opener, settings: Any
) -> None:
    from gateway.server import lifecycle

    settings.TTS_DRAIN_S = 0.3
    api_key, raw = await keyed()
    idle = await connect(open_stream, raw)
    short = await connect(open_stream, raw)
    long = await connect(open_stream, raw)
    await short.send(request("s" * 20, request_id="short", keep_alive=True))
    await long.send(request("l" * 3000, request_id="long"))
    await short.event("header")
    await long.event("header")
    drain = asyncio.create_task(lifecycle.drain(2.0))
    assert await idle.closed() == 1001
    await short.event("complete")  # the active request finishes within the drain
    assert await short.closed() == 1001
    error = (await long.event("error"))["error"]
    assert (error["code"], error["message"]) == (
        "INTERNAL_ERROR",
        "server shutting down",
    )
    assert await long.closed() == 1001
    for stream in (idle, short, long):
        await stream.comm.disconnect()
    assert await drain == 0
    got = {r.request_id: r for r in await usage_records(api_key.account_id)}
    assert (got["short"].status, got["short"].close_code) == ("completed", 1001)
    assert (got["long"].status, got["long"].error_code, got["long"].close_code) == (
        "failed",
        "internal_error",
        1001,
    )
    assert got["long"].tts_audio_out_ms == pcm_ms(audio_frames(long), RATE)
    assert await open_records() == 0 and await lease_free(api_key.account_id)
