"""The embedded layer's channel names do not follow the ``random`` module's state."""

from __future__ import annotations

import random

import pytest
from channels.layers import get_channel_layer

from gateway.memory_layer import EmbeddedChannelLayer


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
