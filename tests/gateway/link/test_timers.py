"""Named timers of the API consumers: a re-armed or disarmed timer's earlier firing is stale."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest

from gateway.layers.process_layer import ProcessChannelLayer
from gateway.link.timers import TICK, NamedTimers, Ticker
from tests.gateway.layers.test_process_layer import make
from tests.support.private_redis import PrivateRedis


class Posts:
    """A fake ``post_later`` that records what would reach the consumer's channel."""

    def __init__(self) -> None:
        self.posted: list[str] = []

    def __call__(self, delay: float, name: str) -> asyncio.Task[None]:
        async def post() -> None:
            await asyncio.sleep(delay)
            self.posted.append(name)

        return asyncio.create_task(post())


async def test_a_fired_timer_is_reported_once_by_name() -> None:
    posts = Posts()
    timers = NamedTimers(posts)
    timers.arm("idle", 0)
    assert timers.armed("idle")
    await asyncio.sleep(0.01)

    assert [timers.fired(p) for p in posts.posted] == ["idle"]
    assert timers.fired(posts.posted[0]) is None  # handled: a duplicate is stale
    assert not timers.armed("idle")


async def test_rearming_makes_a_queued_firing_stale() -> None:
    posts = Posts()
    timers = NamedTimers(posts)
    timers.arm("pump", 0)
    await asyncio.sleep(0.01)  # the first firing waits in the channel
    timers.arm("pump", 0)
    await asyncio.sleep(0.01)

    assert [timers.fired(p) for p in posts.posted] == [None, "pump"]


async def test_disarm_all_cancels_every_pending_post() -> None:
    posts = Posts()
    timers = NamedTimers(posts)
    timers.arm("idle", 0.02)
    timers.arm("expire", 0.02)
    timers.disarm_all()
    await asyncio.sleep(0.05)

    assert posts.posted == [] and not timers.armed("idle")


async def test_a_ticker_stops_when_its_post_turns_the_cancel_into_a_failure() -> None:
    """redis-py, reconnecting during an outage, can turn the task's CancelledError into a
    ConnectionError, which the consumer's post catches (False). The tick loop must end
    there: it went on, so ``stop()`` waited until the loop gave up by itself (60 s) and the
    stream's socket stayed open meanwhile (a chaos run's Redis restart)."""
    posts = 0

    async def post(name: str) -> bool:
        nonlocal posts
        posts += 1
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return False  # the cancellation, swallowed as a failed post
        return True

    ticker = Ticker(post, TICK, 0.001)
    ticker.start()
    await asyncio.sleep(0.05)  # the first post waits
    await asyncio.wait_for(ticker.stop(), 2)
    assert posts == 1


@pytest.mark.redis
async def test_tickers_stop_at_once_across_a_redis_restart(tmp_path: Path) -> None:
    """Real Redis, the gateway's layer: tickers posting as the consumers do, stopped at
    random moments while the server is killed and started again. Before the fix 11 and
    12 of 180 stops (a script's two runs) waited more than 3 s."""
    server = PrivateRedis(tmp_path / "redis.log")
    server.start()
    layer = make(ProcessChannelLayer, server.url)
    channel = await layer.new_channel("specific.")

    async def post(name: str) -> bool:  # as ``LinkConsumer.post_now``
        try:
            await layer.send(channel, {"type": "timer.fire", "name": name})
        except Exception:
            return False
        return True

    async def start_and_stop() -> float:
        ticker = Ticker(post, TICK, 0.001)
        ticker.start()
        await asyncio.sleep(random.uniform(0, 0.3))
        began = time.monotonic()
        await asyncio.wait_for(asyncio.shield(ticker.stop()), 30)
        return time.monotonic() - began

    waits: list[float] = []
    try:
        for _ in range(4):
            stops = [asyncio.create_task(start_and_stop()) for _ in range(30)]
            await asyncio.sleep(0.1)
            server.kill()
            await asyncio.sleep(1.0)
            server.start()
            waits += await asyncio.gather(*stops)
    finally:
        server.kill()
    assert max(waits) < 3, sorted(waits)[-5:]
