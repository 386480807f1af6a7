"""Named timers of the API consumers: a re-armed or disarmed timer's earlier firing is stale."""

from __future__ import annotations

import asyncio

from gateway.link.timers import NamedTimers


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
