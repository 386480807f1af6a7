"""The backbone over Redis with the worker in a separate OS process (real Redis, no mocks)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator

from gateway.layers.redis_layer import BLOCKING_WAIT_S, redis_host
from gateway.liveness import get_liveness
from tests.conftest import child_env, manage
from tests.gateway.test_roundtrip import bearer, collect_tts
from veena_site.asgi import application

pytestmark = [
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def prefix() -> str:
    return f"veena-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def redis_layer(redis_url: str, prefix: str, settings: object) -> str:
    """Point this process's gateway side at Redis."""
    settings.REDIS_URL = redis_url
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "gateway.layers.process_layer.ProcessChannelLayer",
            "CONFIG": {
                "hosts": [redis_host(redis_url, socket_timeout_s=30)],
                "prefix": prefix,
            },
        }
    }
    channel_layers.backends.clear()
    get_liveness.cache_clear()
    return redis_url


def start_worker(redis_url: str, prefix: str, **env: object) -> subprocess.Popen[bytes]:
    """A ``gpuworker`` child process on the fake engines; waits until it is live."""
    proc = manage(
        "gpuworker",
        env=child_env(
            REDIS_URL=redis_url,
            CHANNEL_PREFIX=prefix,
            DJANGO_SETTINGS_MODULE="tests.settings",
            **env,
        ),
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if any(s.serves("tts") for s in get_liveness().live_workers()):
            return proc
        assert proc.poll() is None, "worker exited during start-up"
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("worker did not become live within 30 s")


@pytest.fixture
def worker(redis_layer: str, prefix: str) -> Iterator[subprocess.Popen[bytes]]:
    proc = start_worker(redis_layer, prefix)
    yield proc
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=15)


async def test_tts_round_trip_through_redis_to_worker_process(
    worker: subprocess.Popen[bytes], api_key: str
) -> None:
    comm = WebsocketCommunicator(application, "/v1/tts/ws", headers=bearer(api_key))
    await comm.connect()
    text = "A job that crosses a process boundary."
    await comm.send_to(text_data=json.dumps({"text": text, "sample_rate": 24000}))
    events, frames, close = await collect_tts(comm)
    assert [e["event"] for e in events][0] == "header"
    assert events[-1]["event"] == "complete", events[-1]
    assert abs(len(b"".join(frames[1:])) // 2 - 24 * 10 * len(text)) <= 2
    assert close["code"] == 1000


async def test_an_idle_worker_outlives_the_layers_blocking_wait(
    worker: subprocess.Popen[bytes], api_key: str
) -> None:
    """An idle receive outlasts redis-py's default 5 s read timeout (gateway/layers/redis_layer.py)."""
    time.sleep(
        BLOCKING_WAIT_S + 2
    )  # at least one empty BZPOPMIN on every worker channel

    assert worker.poll() is None, "the worker's listener ended while idle"
    comm = WebsocketCommunicator(application, "/v1/tts/ws", headers=bearer(api_key))
    await comm.connect()
    await comm.send_to(text_data=json.dumps({"text": "Still here."}))
    events, _, close = await collect_tts(comm)
    assert events[-1]["event"] == "complete" and close["code"] == 1000


async def test_worker_killed_mid_job_is_reported_within_5s(
    redis_layer: str, prefix: str, api_key: str
) -> None:
    proc = start_worker(redis_layer, prefix, FAKE_TTS_CHUNK_DELAY_S=0.05)
    comm = WebsocketCommunicator(application, "/v1/tts/ws", headers=bearer(api_key))
    await comm.connect()
    await comm.send_to(text_data=json.dumps({"text": "z" * 3000}))
    assert json.loads(await comm.receive_from(timeout=10))["event"] == "header"
    for _ in range(3):  # the WAV header frame and some audio
        assert (await comm.receive_output(timeout=5)).get("bytes")
    proc.kill()
    killed_at = time.monotonic()
    events, _, close = await collect_tts(comm)
    assert time.monotonic() - killed_at < 5.0
    assert events[-1]["event"] == "error"
    assert events[-1]["error"]["code"] == "MODEL_NOT_LOADED"
    assert close["code"] == 1011
    proc.wait(timeout=5)


async def test_worker_sigterm_stops_cleanly_and_leaves_liveness(
    redis_layer: str, prefix: str
) -> None:
    proc = start_worker(redis_layer, prefix)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0
    assert not get_liveness().live_workers()


async def test_second_worker_takes_jobs_the_first_has_no_slot_for(
    redis_layer: str, prefix: str, api_key: str
) -> None:
    """Two one-slot worker processes on one Redis serve two streams at once (scale-out)."""
    slow = {"TTS_WORKER_SLOTS": "1", "FAKE_TTS_CHUNK_DELAY_S": 0.05}
    procs = [
        start_worker(redis_layer, prefix, **slow),
        start_worker(redis_layer, prefix, **slow),
    ]
    deadline = time.monotonic() + 30
    while len(get_liveness().live_workers()) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    comms = []
    for _ in range(2):
        comm = WebsocketCommunicator(application, "/v1/tts/ws", headers=bearer(api_key))
        await comm.connect()
        await comm.send_to(text_data=json.dumps({"text": "w" * 2000}))
        assert json.loads(await comm.receive_from(timeout=5))["event"] == "header"
        comms.append(comm)
    # Each worker has one slot, so two headers mean both processes are serving.
    for comm in comms:
        await comm.disconnect()
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)


def placements(target: str) -> float:
    from gateway.metrics import PLACEMENTS

    return PLACEMENTS.labels("tts", target)._value.get()


async def test_jobs_spread_over_two_workers_and_each_is_accepted_first_try(
    redis_layer: str, prefix: str, api_key: str
) -> None:
    """Least-loaded placement: six streams fill two three-slot worker processes evenly,
    each accepted by the first worker asked (one submission per stream, none shared)."""
    slow = {"TTS_WORKER_SLOTS": "3", "FAKE_TTS_CHUNK_DELAY_S": 0.05}
    procs = [
        start_worker(redis_layer, prefix, **slow),
        start_worker(redis_layer, prefix, **slow),
    ]
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            live = get_liveness().live_workers()
            if sum(1 for s in live if s.serves("tts") and s.channels) == 2:
                break
            time.sleep(0.1)
        direct, shared = placements("worker"), placements("shared")
        comms = []
        for _ in range(6):
            comm = WebsocketCommunicator(
                application, "/v1/tts/ws", headers=bearer(api_key)
            )
            await comm.connect()
            await comm.send_to(text_data=json.dumps({"text": "w" * 2000}))
            event = json.loads(await comm.receive_from(timeout=5))
            assert event["event"] == "header", event
            comms.append(comm)
        assert placements("worker") - direct == 6  # one attempt per stream
        assert placements("shared") - shared == 0
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            busy = sorted(s.busy["tts"] for s in get_liveness().live_workers())
            if busy == [3, 3]:
                break
            time.sleep(0.05)
        assert busy == [3, 3]
        for comm in comms:
            await comm.disconnect()
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=15)
