"""TTS extensions and REST over Redis with the worker in its own process (fake engine)."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.liveness import get_liveness
from tests.gateway.test_distributed import prefix, redis_layer, worker  # noqa: F401
from tests.tts.conftest import Opener
from tests.tts.test_rest import post

pytestmark = [
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("worker"),
]


def busy_slots() -> int:
    return sum(s.busy.get("tts", 0) for s in get_liveness().live_workers())


async def test_tts_h1_rest_through_redis(
    api_key: str,
) -> None:
    response = await post(
        {"text": "r" * 100, "format": "pcm", "sample_rate": 24000}, api_key
    )
    assert response.status_code == 200, response.content
    assert len(response.content) == 2 * 24000


async def test_tts_i1_c2_k1_incremental_clear_and_keep_alive_through_redis(
    open_stream: Opener,
) -> None:
    stream = await open_stream()
    await stream.send({"event": "start", "format": "pcm", "keep_alive": True})
    await stream.event("header", timeout=10)
    await stream.send({"event": "text", "text": "First part. "})
    await stream.send({"event": "clear"})
    await stream.event("cleared")
    await stream.send({"event": "text", "text": "Second part here. "})
    await stream.send({"event": "flush", "flush_id": 7})
    assert (await stream.event("flushed", timeout=10))["flush_id"] == 7
    await stream.send({"event": "end"})
    assert (await stream.event("complete", timeout=10))["metrics"]["cancelled"] is False
    await stream.send({"text": "Another request on the same stream."})
    assert (await stream.event("complete", timeout=10))["metrics"]["cancelled"] is False
    assert await stream.closed() == 1000


async def test_tts_z3_a_client_gone_before_acceptance_frees_the_slot(
    open_stream: Opener,
) -> None:
    for _ in range(5):
        stream = await open_stream()
        await stream.send({"text": "x" * 3000})
        await stream.comm.disconnect()  # before the acceptance is read
    deadline = time.monotonic() + 6  # CONFIRM_S (2 s) + the 1 s liveness beacon
    while busy_slots():
        assert time.monotonic() < deadline, f"{busy_slots()} slots still busy"
        await asyncio.sleep(0.2)
