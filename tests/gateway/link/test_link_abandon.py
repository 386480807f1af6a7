"""``WorkerLink.abandon``: a late acceptance is cancelled at its worker, and a link whose
submissions were all answered leaves nothing reading its channel (gateway.link.jobclient)."""

from __future__ import annotations

import asyncio

import pytest
import redis

from gateway.contracts import WORKER_CHANNELS, JobAccepted, JobBusy
from gateway.layers.memory_layer import EmbeddedChannelLayer
from gateway.link import unanswered
from gateway.link.jobclient import WorkerLink

WORKER = "asr-worker.w1"


submission = JobBusy(job_id="")  # any message: the test plays the worker


async def link_on(layer: EmbeddedChannelLayer) -> WorkerLink:
    return WorkerLink(
        layer=layer,
        own_channel=await layer.new_channel(),
        kind="asr",
        answer_ms=300,
        wait_ms=300,
        stall_s=5,
    )


@pytest.mark.asyncio
async def test_an_answered_link_is_abandoned_without_a_drain() -> None:
    layer = EmbeddedChannelLayer()
    link = await link_on(layer)
    await link.submit(submission)
    sent = await layer.receive(WORKER_CHANNELS["asr"])
    accepted = JobAccepted(
        job_id=sent["job_id"], worker_channel=WORKER, model_version="m"
    )
    await link.on_reply(accepted.to_message())
    link.abandon()
    await asyncio.sleep(0)  # the abandon task runs
    await layer.send(link.own_channel, {"type": "probe"})
    await unanswered.abandoned_links_drained()
    assert not unanswered.waiting(link.own_channel)
    # Nothing read the consumer's channel after it ended: the probe is still there.
    assert (await asyncio.wait_for(layer.receive(link.own_channel), 1))[
        "type"
    ] == "probe"
    assert await cancel_of(layer) == sent["job_id"]


async def cancel_of(layer: EmbeddedChannelLayer) -> str:
    """The job id of the next cancel on the worker's channel (keepalives skipped)."""
    while True:
        message = await asyncio.wait_for(layer.receive(WORKER), 2)
        if message["type"] == "asr.job.cancel":
            return str(message["job_id"])


@pytest.mark.asyncio
async def test_an_acceptance_arriving_after_the_consumer_ended_is_cancelled() -> None:
    layer = EmbeddedChannelLayer()
    link = await link_on(layer)
    await link.submit(submission)
    sent = await layer.receive(WORKER_CHANNELS["asr"])
    link.abandon()  # the consumer ended while its job was being admitted
    await asyncio.sleep(0.05)
    late = JobAccepted(job_id=sent["job_id"], worker_channel=WORKER, model_version="m")
    await layer.send(link.own_channel, late.to_message())
    assert await cancel_of(layer) == sent["job_id"]
    await unanswered.abandoned_links_drained()  # ends as soon as the answer came
    assert not unanswered.waiting(link.own_channel)


@pytest.mark.asyncio
async def test_a_link_timer_that_finds_the_layer_down_ends_quietly(caplog) -> None:
    """A Redis outage under a link timer's post is one warning line, not a task whose
    exception nobody retrieves (a traceback in a chaos run's gateway log)."""
    layer = EmbeddedChannelLayer()
    link = await link_on(layer)

    async def down(channel: str, message: dict[str, object]) -> None:
        raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:6379.")

    layer.send = down  # type: ignore[method-assign]
    link._later(0, "stall")
    (task,) = link._timers
    await asyncio.wait({task}, timeout=2)
    assert task.done() and task.exception() is None
    assert "asr job : timer stall not posted" in caplog.text
