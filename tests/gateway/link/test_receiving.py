"""receive_until: a time-limited receive that ends by a wake-up, not by cancellation."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.layers import get_channel_layer

from gateway.link.receiving import WAKE, receive_until


class RecordingLayer:
    """Wraps the in-memory layer and records receives that were cancelled."""

    def __init__(self) -> None:
        self.inner = get_channel_layer()
        self.cancelled = 0
        self.send_fails = False

    async def receive(self, channel: str) -> dict[str, Any]:
        try:
            return await self.inner.receive(channel)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        if self.send_fails:
            raise ConnectionError("layer down")
        await self.inner.send(channel, message)


async def test_a_message_within_the_time_is_returned() -> None:
    layer = RecordingLayer()
    await layer.send("c", {"type": "gpu.job.accepted", "job_id": "j"})
    assert (await receive_until(layer, "c", 1.0))["job_id"] == "j"


async def test_at_the_time_limit_the_receive_is_woken_not_cancelled() -> None:
    layer = RecordingLayer()
    assert await receive_until(layer, "c", 0.05) is None
    assert layer.cancelled == 0  # it ended by reading the wake-up


async def test_a_message_that_beats_the_wake_up_is_returned() -> None:
    layer = RecordingLayer()
    receiving = asyncio.ensure_future(receive_until(layer, "c", 0.05))
    await asyncio.sleep(0)
    await layer.send("c", {"type": "gpu.job.accepted", "job_id": "late"})
    assert (await receiving)["job_id"] == "late"


async def test_a_layer_that_cannot_take_the_wake_up_gets_a_cancel(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr("gateway.link.receiving.WAKE_PATIENCE_S", 0.05)
    layer = RecordingLayer()
    layer.send_fails = True
    assert await receive_until(layer, "c", 0.05) is None
    assert layer.cancelled == 1
    assert WAKE == "layer.wake"
