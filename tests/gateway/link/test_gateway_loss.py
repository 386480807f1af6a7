"""No worker job outlives its gateway (issue 9 item 3), in process with the embedded worker.

A consumer that crashes ends its job at once; one stuck for good stops its keepalives and the
worker ends the job, while one busy in a long handler keeps it; heartbeats that cannot be
delivered count; a job cancelled while it is being admitted is cancelled at the worker that
accepts it, never through the shared channel, whether the consumer is still there or gone.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from channels.exceptions import ChannelFull
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from asr.consumers import RealtimeConsumer
from gateway.contracts import JobAccepted, Message
from gateway.link import jobclient
from gateway.link.consumers import WorkerClientConsumer
from gateway.worker.jobs import JobRegistry
from tts.messages import TtsSubmit
from tts.worker.engines.fake import FakeTts
from tts.worker.jobs import TtsJob
from veena_site.asgi import application
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)

SLOT_FREE_S = 10.0  # issue 9: a job whose gateway is gone frees its slot within 10 s


def bearer(raw: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", b"Bearer " + raw.encode())]


@pytest.fixture
def fast_loss(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A short keepalive timeout and stuck-consumer limit, so each case takes seconds."""
    settings.JOB_KEEPALIVE_TIMEOUT_S = 1.5
    settings.WORKER_HEARTBEAT_S = 0.25
    monkeypatch.setattr(jobclient, "CONSUMER_HUNG_S", 1.0)
    return settings


@pytest.fixture
async def hang() -> AsyncIterator[asyncio.Event]:
    """An event a patched handler waits on; set at the end so nothing stays stuck."""
    event = asyncio.Event()
    yield event
    event.set()


async def wait_until_free(runtime: WorkerRuntime, kind: str) -> float:
    """Seconds until no slot of ``kind`` is busy; fails after ``SLOT_FREE_S``."""
    started = time.monotonic()
    while runtime.jobs.busy(kind):  # type: ignore[arg-type]
        elapsed = time.monotonic() - started
        assert elapsed < SLOT_FREE_S, f"{kind} slot still busy after {elapsed:.1f} s"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


@pytest.fixture
def hang_heartbeats(
    hang: asyncio.Event, monkeypatch: pytest.MonkeyPatch
) -> Callable[[type], None]:
    """``hang_heartbeats(cls)``: the consumer's next heartbeat handler never returns."""

    async def stuck(self: Any, message: dict[str, Any]) -> None:
        await hang.wait()

    return lambda cls: monkeypatch.setattr(cls, "gpu_job_heartbeat", stuck)


async def test_a_hung_realtime_consumer_stops_keepalives_and_its_slot_is_freed(
    fast_loss: Any,
    embedded_worker: WorkerRuntime,
    api_key: str,
    hang: asyncio.Event,
    hang_heartbeats: Callable[[type], None],
) -> None:
    comm = WebsocketCommunicator(application, "/v1/realtime", headers=bearer(api_key))
    await comm.connect()
    assert json.loads(await comm.receive_from())["type"] == "session.created"
    assert embedded_worker.jobs.busy("asr") == 1
    hang_heartbeats(RealtimeConsumer)
    await wait_until_free(embedded_worker, "asr")
    hang.set()  # unstuck, the consumer handles the disconnect and releases
    await comm.disconnect()


async def test_a_hung_tts_consumer_ends_an_incremental_job_waiting_for_text(
    fast_loss: Any,
    embedded_worker: WorkerRuntime,
    api_key: str,
    hang: asyncio.Event,
    hang_heartbeats: Callable[[type], None],
) -> None:
    """The incremental job waits for input only as long as its gateway keeps it alive."""
    comm = WebsocketCommunicator(application, "/v1/tts/ws", headers=bearer(api_key))
    await comm.connect()
    await comm.send_to(text_data=json.dumps({"event": "start", "format": "pcm"}))
    assert json.loads(await comm.receive_from())["event"] == "header"
    assert embedded_worker.jobs.busy("tts") == 1
    hang_heartbeats(WorkerClientConsumer)
    await wait_until_free(embedded_worker, "tts")
    hang.set()  # unstuck, the consumer handles the disconnect and releases
    await comm.disconnect()


async def test_a_consumer_busy_in_a_long_handler_keeps_its_job(
    fast_loss: Any,
    embedded_worker: WorkerRuntime,
    api_key: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seconds in one handler (a 15 MiB append being decoded) are not a lost gateway."""
    monkeypatch.setattr(jobclient, "CONSUMER_HUNG_S", 60.0)
    comm = WebsocketCommunicator(application, "/v1/realtime", headers=bearer(api_key))
    await comm.connect()
    assert json.loads(await comm.receive_from())["type"] == "session.created"
    busy_s = 2 * fast_loss.JOB_KEEPALIVE_TIMEOUT_S
    original = RealtimeConsumer.gpu_job_heartbeat
    slow_once = [True]

    async def slow(self: Any, message: dict[str, Any]) -> None:
        if slow_once.pop() if slow_once else False:
            await asyncio.sleep(busy_s)
        await original(self, message)

    monkeypatch.setattr(RealtimeConsumer, "gpu_job_heartbeat", slow)
    await asyncio.sleep(busy_s + 1.5)
    assert embedded_worker.jobs.busy("asr") == 1, "the worker ended a live session"
    await comm.send_to(text_data=json.dumps({"type": "input_audio_buffer.clear"}))
    assert json.loads(await comm.receive_from())["type"] == "input_audio_buffer.cleared"
    await comm.disconnect()
    await wait_until_free(embedded_worker, "asr")


async def test_a_crashed_consumer_ends_its_worker_job(
    embedded_worker: WorkerRuntime, api_key: str
) -> None:
    """A message with no handler (F2) crashes the stream at the consumer's boundary:
    internal error, close 1011, and its session's slot is freed."""
    comm = WebsocketCommunicator(application, "/v1/realtime", headers=bearer(api_key))
    await comm.connect()
    assert json.loads(await comm.receive_from())["type"] == "session.created"
    job = next(iter(embedded_worker.jobs.running.values()))
    await get_channel_layer().send(job.reply_channel, {"type": "no.such.handler"})
    error = json.loads(await comm.receive_from(timeout=5))
    assert error["error"]["code"] == "internal_error"
    assert await comm.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": 1011,
    }
    await wait_until_free(embedded_worker, "asr")


class FailingHeartbeats:
    """A reply channel that takes everything but heartbeats (a full or gone gateway)."""

    def __init__(self) -> None:
        self.sent: list[Message] = []

    async def __call__(self, message: Message) -> None:
        if message.TYPE == "gpu.job.heartbeat":
            raise ChannelFull("reply")
        self.sent.append(message)


async def test_heartbeats_that_cannot_be_delivered_end_the_job() -> None:
    registry = JobRegistry({"tts": 1}, heartbeat_s=0.05, keepalive_timeout_s=60)
    send = FailingHeartbeats()
    submit = TtsSubmit(
        job_id="j1",
        reply_channel="reply",
        deadline=time.time() + 5,
        voice="tone",
        segments=[],
        incremental=True,  # waits for text that never comes
    )
    accepted = JobAccepted(job_id="j1", worker_channel="w", model_version="fake/tone")
    registry.start(TtsJob(submit, FakeTts(), send), send, accepted)
    for _ in range(40):  # the gateway keeps confirming; only the heartbeats fail
        registry.touch("j1")
        await asyncio.sleep(0.025)
    assert registry.has_room("tts"), "three undelivered heartbeats must end the job"
    await registry.wait_idle()


async def fake_worker_channel() -> str:
    return await get_channel_layer().new_channel("fake-worker.")


async def nothing_on(channel: str, timeout: float = 0.3) -> bool:
    try:
        await asyncio.wait_for(get_channel_layer().receive(channel), timeout)
    except TimeoutError:
        return True
    return False


async def accept_as(worker: str, submit: dict[str, Any]) -> None:
    accepted = JobAccepted(
        job_id=submit["job_id"], worker_channel=worker, model_version="fake/tone"
    )
    await get_channel_layer().send(submit["reply_channel"], accepted.to_message())


async def test_a_cancel_before_acceptance_reaches_the_accepting_worker(
    api_key: str,
) -> None:
    """The consumer is still there (keep-alive stream): the late acceptance is answered
    with a cancel on the accepting worker's own channel, none on the shared one."""
    layer = get_channel_layer()
    comm = WebsocketCommunicator(application, "/v1/tts/ws", headers=bearer(api_key))
    await comm.connect()
    request = {"text": "Withdrawn early.", "keep_alive": True, "format": "pcm"}
    await comm.send_to(text_data=json.dumps(request))
    submit = await asyncio.wait_for(layer.receive("tts-worker"), 5)
    await comm.send_to(text_data=json.dumps({"event": "cancel"}))
    while json.loads(await comm.receive_from())["event"] != "complete":
        pass
    holder = await fake_worker_channel()
    await accept_as(holder, submit)
    cancel = await asyncio.wait_for(layer.receive(holder), 5)
    assert cancel == {"type": "tts.job.cancel", "job_id": submit["job_id"]}
    assert await nothing_on("tts-worker")
    await comm.disconnect()


async def test_a_cancel_before_acceptance_reaches_the_worker_after_the_client_left(
    api_key: str,
) -> None:
    """The consumer has ended: its link still answers the late acceptance with a cancel."""
    layer = get_channel_layer()
    comm = WebsocketCommunicator(application, "/v1/realtime", headers=bearer(api_key))
    await comm.connect()
    submit = await asyncio.wait_for(layer.receive("asr-worker"), 5)
    await comm.disconnect()
    holder = await fake_worker_channel()
    await accept_as(holder, submit)
    cancel = await asyncio.wait_for(layer.receive(holder), 5)
    assert cancel == {"type": "asr.job.cancel", "job_id": submit["job_id"]}
    assert await nothing_on("asr-worker")
