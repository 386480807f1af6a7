"""Workers, slots, admission and resource release (docs/specs/tts-ws.md §10–§11) over the socket."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import pytest

from tests.tts.conftest import Opener, Stream
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)


async def settle(runtime: WorkerRuntime, timeout: float = 3.0) -> None:
    """Z3: wait until every TTS slot of the worker is free again."""
    deadline = time.monotonic() + timeout
    while runtime.jobs.busy("tts") or runtime.jobs._tasks:
        assert time.monotonic() < deadline, (
            f"{runtime.jobs.busy('tts')} slots still busy"
        )
        await asyncio.sleep(0.01)


def test_tts_q1_default_slots_are_eight_per_core() -> None:
    from veena_site import settings as defaults

    if "TTS_WORKER_SLOTS" not in os.environ:
        assert defaults.TTS_WORKER_SLOTS == 8 * (os.cpu_count() or 1)


async def test_tts_q3_every_slot_busy_is_overloaded_after_the_admission_wait(
    slow_fake: WorkerRuntime, open_stream: Opener, settings: Any
) -> None:
    settings.TTS_ADMISSION_WAIT_MS = 300
    slow_fake.jobs.slots["tts"] = 1
    first = await open_stream()
    await first.send({"text": "b" * 2000})
    await first.event("header")
    second = await open_stream()
    started = time.monotonic()
    await second.send({"text": "Second stream."})
    error = (await second.event("error"))["error"]
    waited = time.monotonic() - started
    assert error["code"] == "STREAMING_OVERLOADED" and error["retry_after_ms"] == 1000
    assert error["message"] == "Streaming capacity exhausted. Retry shortly."
    assert 0.25 < waited < 1.2
    assert await second.closed() == 1013
    await first.send({"event": "ping"})
    await first.event("pong")  # the first stream is unaffected
    await first.send({"event": "cancel"})
    await first.event("complete")
    await settle(slow_fake)


async def test_tts_q3_a_slot_freed_during_the_wait_is_taken(
    slow_fake: WorkerRuntime, open_stream: Opener
) -> None:
    slow_fake.jobs.slots["tts"] = 1
    first = await open_stream()
    await first.send({"text": "b" * 2000})
    await first.event("header")
    second = await open_stream()
    await second.send({"text": "Waiting for a slot."})
    await asyncio.sleep(0.2)
    await first.send({"event": "cancel"})
    await first.event("complete")
    assert (await second.event("header"))["event"] == "header"
    await second.event("complete")


async def test_tts_q3_worker_not_ready_is_model_not_loaded(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    embedded_worker.engines["tts"].engine, engine = None, embedded_worker.engine("tts")
    try:
        stream = await open_stream()
        started = time.monotonic()
        await stream.send({"text": "Loading still."})
        error = (await stream.event("error"))["error"]
        assert error["code"] == "MODEL_NOT_LOADED"
        assert time.monotonic() - started < 2.0
        assert await stream.closed() == 1011
    finally:
        embedded_worker.engines["tts"].engine = engine


async def test_tts_z4_a_silent_worker_is_reported_lost(
    slow_fake: WorkerRuntime, open_stream: Opener, settings: Any
) -> None:
    settings.TTS_WORKER_STALL_S = 0.4
    slow_fake.jobs.heartbeat_s = 60
    slow_fake.engines["tts"].engine.chunk_delay_s = 10
    stream = await open_stream()
    await stream.send({"text": "Nobody home."})
    await stream.event("header")
    started = time.monotonic()
    error = (await stream.event("error"))["error"]
    assert error["code"] == "MODEL_NOT_LOADED"
    assert error["message"] == "synthesis worker stopped responding"
    assert time.monotonic() - started < 1.5
    assert await stream.closed() == 1011
    await settle(slow_fake)


async def test_tts_q8_acks_keep_a_long_request_flowing(
    embedded_worker: WorkerRuntime, open_stream: Opener, settings: Any
) -> None:
    settings.TTS_CHUNK_WINDOW = 4
    stream = await open_stream()
    await stream.send({"text": "f" * 2000, "format": "pcm"})
    metrics = (await stream.event("complete"))["metrics"]
    assert metrics["chunks_sent"] >= 100 and metrics["audio_duration_seconds"] == 20.0


async def exit_paths(open_stream: Opener, runtime: WorkerRuntime) -> list[str]:
    """Drive one stream down each exit path of Z3; return the paths taken."""
    paths = []

    async def new() -> Stream:
        return await open_stream()

    stream = await new()  # complete
    await stream.send({"text": "Done normally."})
    await stream.closed()
    paths.append("complete")

    stream = await new()  # cancel before first audio
    await stream.send({"text": "x" * 500})
    await stream.send({"event": "cancel"})
    await stream.closed()
    paths.append("cancel-before-audio")

    stream = await new()  # cancel mid-stream
    await stream.send({"text": "x" * 1000})
    await stream.until(lambda item: item[0] == "bytes" and len(item[1]) > 44)
    await stream.send({"event": "cancel"})
    await stream.closed()
    paths.append("cancel-mid-stream")

    stream = await new()  # clear of an incremental request, then end
    await stream.send({"event": "start"})
    await stream.send({"event": "text", "text": "Some words to drop. "})
    await stream.send({"event": "clear"})
    await stream.send({"event": "end"})
    await stream.closed()
    paths.append("clear")

    stream = await new()  # validation error
    await stream.send({"text": ""})
    await stream.closed()
    paths.append("validation-error")

    for stage in ("idle", "submitted", "streaming"):  # disconnect at each stage
        stream = await new()
        if stage != "idle":
            await stream.send({"text": "y" * 1000})
        if stage == "streaming":
            await stream.event("header")
        await stream.comm.disconnect()
        paths.append(f"disconnect-{stage}")
    return paths


async def test_tts_z3_every_exit_path_frees_the_worker_slot(
    slow_fake: WorkerRuntime, open_stream: Opener
) -> None:
    paths = await exit_paths(open_stream, slow_fake)
    assert len(paths) == 8
    await asyncio.sleep(0.3)
    await settle(slow_fake)


async def test_tts_z3_many_open_cancel_close_cycles_leave_no_residue(
    slow_fake: WorkerRuntime, open_stream: Opener
) -> None:
    for i in range(100):
        stream = await open_stream()
        await stream.send({"text": "w" * 500, "keep_alive": i % 2 == 0})
        if i % 3:
            await stream.event("header")
        await stream.send({"event": "cancel"})
        await stream.event("complete")
        await stream.comm.disconnect()
    await settle(slow_fake)
