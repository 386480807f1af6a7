"""Our consumers dispatch without Channels' per-message database hop (gateway.dispatch).

Channels 4.2's ``AsyncConsumer.dispatch`` awaits ``aclose_old_connections()`` (a trip onto the
one thread-sensitive sync thread) before every handler; under load every worker message
queued there behind the accounts' queries (issue 17's soak). The test holds for every
consumer class of the product, so a new one cannot bring the hop back.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.consumer import AsyncConsumer

import asr.consumers
import gateway.link.boundary
import gateway.link.consumers
import tts.consumers
import veena_site.worker

CONSUMERS = [
    tts.consumers.TtsConsumer,
    asr.consumers.RealtimeConsumer,
    veena_site.worker.GpuWorkerConsumer,
]
# The stream consumers' bases: abstract, their hooks are the apps' (issue 33).
BASES = [
    gateway.link.boundary.StreamBoundary,
    gateway.link.consumers.WorkerClientConsumer,
]


def product_consumers() -> set[type]:
    """Every AsyncConsumer subclass defined in the product's packages."""
    found: set[type] = set()
    todo = [AsyncConsumer]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            todo.append(sub)
            if sub.__module__.split(".")[0] in {
                "gateway",
                "tts",
                "asr",
                "veena_site",
                "accounts",
                "openai_rest",
            }:
                found.add(sub)
    return found


def test_the_list_covers_every_consumer_of_the_product() -> None:
    assert product_consumers() == set(CONSUMERS) | set(BASES)


@pytest.mark.parametrize("cls", BASES, ids=lambda c: c.__name__)
def test_the_bases_cannot_be_made_without_the_apps_hooks(cls: type) -> None:
    with pytest.raises(TypeError, match="abstract"):
        cls.__new__(cls)


@pytest.mark.parametrize("cls", CONSUMERS, ids=lambda c: c.__name__)
async def test_a_handler_runs_without_a_trip_to_the_database_thread(
    cls: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    import channels.consumer

    async def hop() -> None:
        raise AssertionError("aclose_old_connections awaited before a handler")

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", hop)
    consumer = cls.__new__(cls)  # no scope needed: only dispatch runs
    handled: list[dict[str, Any]] = []

    async def probe(message: dict[str, Any]) -> None:
        handled.append(message)

    consumer.probe_message = probe
    consumer.crashed = False
    await consumer.dispatch({"type": "probe.message"})
    assert handled == [{"type": "probe.message"}]


async def test_an_unknown_message_type_is_still_refused() -> None:
    consumer = veena_site.worker.GpuWorkerConsumer.__new__(
        veena_site.worker.GpuWorkerConsumer
    )
    with pytest.raises(ValueError, match="No handler"):
        await consumer.dispatch({"type": "no.such.handler"})
    await asyncio.sleep(0)
