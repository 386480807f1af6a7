"""The embedded layer's channel names do not follow the ``random`` module's state."""

from __future__ import annotations

import asyncio
import random

import pytest
from channels.layers import get_channel_layer

from gateway.layers.memory_layer import EmbeddedChannelLayer


@pytest.mark.asyncio
async def test_channel_names_differ_after_the_same_random_seed() -> None:
    layer = EmbeddedChannelLayer()
    random.seed(0)
    first = await layer.new_channel()
    random.seed(0)
    second = await layer.new_channel()
    assert first != second
    assert layer.valid_channel_name(first) and first.startswith("specific..inmemory!")


@pytest.mark.asyncio
async def test_a_reseeded_consumer_channel_gets_only_its_own_messages() -> None:
    layer = get_channel_layer()
    assert isinstance(layer, EmbeddedChannelLayer)  # the embedded default's layer
    random.seed(7)
    old = await layer.new_channel()
    random.seed(7)
    new = await layer.new_channel()
    await layer.send(new, {"type": "gpu.job.accepted", "job_id": "j"})
    assert (await layer.receive(new))["job_id"] == "j"
    await layer.flush()
    assert old != new


@pytest.mark.asyncio
async def test_expired_messages_are_swept_at_most_once_a_second(monkeypatch) -> None:
    from gateway.layers import memory_layer

    layer = EmbeddedChannelLayer(expiry=1)
    sweeps = []
    monkeypatch.setattr(
        memory_layer.InMemoryChannelLayer,
        "_clean_expired",
        lambda self: sweeps.append(1),
    )
    for n in range(50):
        await layer.send("c", {"type": "m", "n": n})
        await layer.receive("c")
    assert len(sweeps) == 1  # 50 receives, one walk over every channel
    layer._swept_at -= memory_layer.SWEEP_EVERY_S
    await layer.send("c", {"type": "m"})
    await layer.receive("c")
    assert len(sweeps) == 2


@pytest.mark.asyncio
async def test_an_expired_message_still_goes_with_the_next_sweep() -> None:
    from gateway.layers import memory_layer

    layer = EmbeddedChannelLayer(expiry=0)
    await layer.send("abandoned", {"type": "m"})
    await layer.send("other", {"type": "n"})
    await asyncio.sleep(0.01)
    layer._swept_at -= memory_layer.SWEEP_EVERY_S
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(
            layer.receive("other"), 0.05
        )  # expired: swept, not given
    assert "abandoned" not in layer.channels
