"""ProcessChannelLayer on a real Redis: every process-specific message arrives, soon, in order."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from channels.exceptions import ChannelFull
from channels_redis.core import RedisChannelLayer

from gateway.layers import process_layer
from gateway.layers.process_layer import ProcessChannelLayer
from gateway.layers.redis_layer import redis_host
from tests.support.private_redis import PrivateRedis

pytestmark = [pytest.mark.redis]

CONSUMERS = 50
MESSAGES = 40


def make(layer_class: type, url: str, **config: Any) -> Any:
    return layer_class(
        hosts=[redis_host(url, socket_timeout_s=30)],
        prefix=f"t-{uuid.uuid4().hex[:8]}",
        **config,
    )


@pytest.fixture
async def layer(redis_url: str) -> Any:
    made = make(ProcessChannelLayer, redis_url)
    yield made
    await made.flush()


async def test_many_consumers_with_cancelled_receives_lose_nothing(
    layer: ProcessChannelLayer,
) -> None:
    """50 streams through one process; random receives are cancelled mid-wait (as Channels
    does when a consumer ends): every stream still gets each message once, in order."""
    channels = [await layer.new_channel() for _ in range(CONSUMERS)]
    rng = random.Random(17)
    cancelled = 0

    async def consume(channel: str) -> list[int]:
        nonlocal cancelled
        got: list[int] = []
        while len(got) < MESSAGES:
            receive = asyncio.ensure_future(layer.receive(channel))
            if rng.random() < 0.3:
                await asyncio.sleep(rng.random() * 0.005)
                if receive.cancel():
                    cancelled += 1
                    await asyncio.gather(receive, return_exceptions=True)
                    continue
            got.append((await receive)["n"])
        return got

    async def produce(channel: str) -> None:
        for n in range(MESSAGES):
            while True:
                try:
                    await layer.send(channel, {"type": "t.n", "n": n})
                    break
                except ChannelFull:  # the burst outran the reader: the sender sees it
                    await asyncio.sleep(0.01)
            await asyncio.sleep(rng.random() * 0.002)

    consumers = [asyncio.ensure_future(consume(c)) for c in channels]
    await asyncio.gather(*(produce(c) for c in channels))
    results = await asyncio.wait_for(asyncio.gather(*consumers), 60)
    assert cancelled > 50, "the test must cancel receives while messages arrive"
    for got in results:
        assert got == list(range(MESSAGES))
    assert layer.buffered_channels() == 0


async def idle_receivers_then_probe(
    layer: Any, idle: int, limit_s: float
) -> list[float]:
    """Seconds a ``readyz.`` receive waits for a message sent while ``idle`` receivers of
    ``specific.`` channels wait (``inf`` past ``limit_s``), three times."""
    idle_channels = [await layer.new_channel("specific.") for _ in range(idle)]
    waiting = [asyncio.ensure_future(layer.receive(c)) for c in idle_channels]
    await asyncio.sleep(0.3)  # one of them is in its blocking pop now
    probe = await layer.new_channel("readyz.")
    waits: list[float] = []
    try:
        for _ in range(3):
            receiving = asyncio.ensure_future(layer.receive(probe))
            await asyncio.sleep(0.05)
            started = time.monotonic()
            await layer.send(probe, {"type": "readyz.probe"})
            try:
                await asyncio.wait_for(receiving, limit_s)
            except TimeoutError:
                waits.append(float("inf"))
                break
            waits.append(time.monotonic() - started)
    finally:
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
    return waits


async def test_one_prefix_never_waits_behind_another(
    layer: ProcessChannelLayer,
) -> None:
    waits = await idle_receivers_then_probe(layer, 20, limit_s=5)
    assert max(waits) < 0.1, waits


async def test_the_plain_layer_starves_a_second_prefix(redis_url: str) -> None:
    """What the test above guards against: on channels-redis' layer the ``specific.`` lock
    holder pops its own real channel again and again, and ``readyz.`` waits until one of
    those receivers gets a message (here: never)."""
    plain = make(RedisChannelLayer, redis_url)
    try:
        assert max(await idle_receivers_then_probe(plain, 20, limit_s=1)) > 0.5
    finally:
        await plain.flush()


async def test_sends_wait_for_a_free_connection(redis_url: str) -> None:
    """Beyond the pool's connections a command waits; redis-py's default pool raised
    ``MaxConnectionsError`` (a gateway's sends failed under load)."""
    entry = {**redis_host(redis_url, socket_timeout_s=30), "max_connections": 2}
    layers = [
        cls(hosts=[entry], prefix=f"t-{uuid.uuid4().hex[:8]}")
        for cls in (ProcessChannelLayer, RedisChannelLayer)
    ]
    try:
        for target in layers:
            channel = await target.new_channel()
            sends = [target.send(channel, {"type": "t.n", "n": n}) for n in range(30)]
            results = await asyncio.gather(*sends, return_exceptions=True)
            failed = [r for r in results if isinstance(r, redis.MaxConnectionsError)]
            if isinstance(target, ProcessChannelLayer):
                assert results == [None] * 30
            else:
                assert failed, (
                    "the plain layer's pool no longer raises: drop the override"
                )
    finally:
        for target in layers:
            await target.flush()


async def test_capacity_patterns_match_the_prefix(redis_url: str) -> None:
    sized = make(ProcessChannelLayer, redis_url, channel_capacity={"worker.*": 7})
    assert sized.get_capacity(await sized.new_channel("worker.")) == 7
    assert sized.get_capacity(await sized.new_channel()) == 100
    await sized.close_pools()


async def test_a_full_inbox_drops_its_oldest(redis_url: str) -> None:
    small = make(ProcessChannelLayer, redis_url, capacity=3)
    try:
        unread, read = await small.new_channel(), await small.new_channel()
        reading = asyncio.ensure_future(small.receive(read))  # the reader runs
        redis_key = small.prefix + small.real_channel
        for n in range(5):
            await small.send(unread, {"type": "t.n", "n": n})
            while await small.connection(0).zcard(redis_key):  # routed to its inbox
                await asyncio.sleep(0.01)
        await small.send(read, {"type": "t.n", "n": 99})
        assert (await asyncio.wait_for(reading, 5))["n"] == 99
        assert [(await small.receive(unread))["n"] for _ in range(3)] == [2, 3, 4]
    finally:
        await small.flush()


async def test_unread_inboxes_expire(
    layer: ProcessChannelLayer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Messages for channels nobody receives on (an abandoned consumer) go after ``expiry``."""
    abandoned = [await layer.new_channel() for _ in range(30)]
    for channel in abandoned:
        await layer.send(channel, {"type": "t.lost"})
    live = await layer.new_channel()
    await layer.send(live, {"type": "t.n"})
    await layer.receive(live)
    assert layer.buffered_channels() == 30
    layer.expiry = 1
    waiting = asyncio.ensure_future(layer.receive(live))
    deadline = time.monotonic() + 5
    while layer.buffered_channels() > 1 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert layer.buffered_channels() == 1  # only the live receive's inbox
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert layer.buffered_channels() == 0


async def test_the_reader_ends_when_idle_and_restarts(
    layer: ProcessChannelLayer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process_layer, "READER_IDLE_S", 0.2)
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "t.n", "n": 1})
    assert (await layer.receive(channel))["n"] == 1
    reader = layer._reader
    assert reader is not None
    await asyncio.wait_for(asyncio.shield(reader), 5)  # ends by itself, between pops
    await layer.send(channel, {"type": "t.n", "n": 2})
    assert (await asyncio.wait_for(layer.receive(channel), 5))["n"] == 2


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path / "redis.log")
    server.start()
    yield server
    server.kill()


async def test_a_redis_outage_reaches_every_waiter_and_receives_work_after(
    private_redis: PrivateRedis,
) -> None:
    layer = make(ProcessChannelLayer, private_redis.url)
    channels = [await layer.new_channel(p) for p in ("specific.", "worker.", "readyz.")]
    waiting = [asyncio.ensure_future(layer.receive(c)) for c in channels]
    await asyncio.sleep(0.2)
    private_redis.kill()
    done, _ = await asyncio.wait(waiting, timeout=10)
    assert len(done) == len(waiting), "a waiter hung through the outage"
    for task in waiting:
        assert isinstance(task.exception(), redis.ConnectionError)
    with pytest.raises(redis.ConnectionError):  # down: a new receive fails too
        await asyncio.wait_for(layer.receive(channels[0]), 10)
    private_redis.start()
    deadline = time.monotonic() + 10
    while True:
        try:
            await layer.send(channels[1], {"type": "t.back"})
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline, "send did not recover"
            await asyncio.sleep(0.1)
    message = await asyncio.wait_for(layer.receive(channels[1]), 10)
    assert message == {"type": "t.back"}
    await layer.flush()


def test_a_layer_receives_on_one_event_loop_after_another(redis_url: str) -> None:
    """Tests and sync callers run loops one after another: the reader of a finished loop is
    replaced, and what it had routed before is still delivered."""
    layer = make(ProcessChannelLayer, redis_url)

    async def on_first_loop() -> tuple[str, str]:
        kept, other = await layer.new_channel(), await layer.new_channel()
        await layer.send(kept, {"type": "t.n", "n": 1})
        await layer.send(other, {"type": "t.n", "n": 2})
        assert (await asyncio.wait_for(layer.receive(other), 5))["n"] == 2
        return kept, other  # "kept" was routed before "other": it waits in its inbox

    kept, other = asyncio.run(on_first_loop())

    async def on_second_loop() -> list[int]:
        try:
            await layer.send(other, {"type": "t.n", "n": 3})
            return [
                (await asyncio.wait_for(layer.receive(c), 5))["n"]
                for c in (kept, other)
            ]
        finally:
            await layer.flush()

    assert asyncio.run(on_second_loop()) == [1, 3]
