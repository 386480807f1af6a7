"""Worker-side job behaviour: flow control, cancellation, failures, slots (fake engines)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from gateway.contracts import JobAccepted, JobFailed, Message
from gateway.worker.jobs import JobRegistry
from tts.messages import TtsAck, TtsSubmit
from tts.worker.engines.fake import FakeTts
from tts.worker.jobs import TtsJob


class Recorder:
    """A reply sender that records messages instead of using a channel layer."""

    def __init__(self) -> None:
        self.sent: list[Message] = []

    async def __call__(self, message: Message) -> None:
        self.sent.append(message)

    def of(self, kind: str) -> list[Message]:
        return [m for m in self.sent if m.TYPE == kind]


def submit(text: str, **kw: Any) -> TtsSubmit:
    return TtsSubmit(
        job_id="j1",
        reply_channel="reply",
        deadline=time.time() + 5,
        voice="tone",
        segments=[{"seq": 0, "text": text, "char_start": 0, "char_end": len(text)}],
        **kw,
    )


def accepted() -> JobAccepted:
    return JobAccepted(job_id="j1", worker_channel="w", model_version="fake/tone")


async def test_tts_job_never_runs_more_than_the_window_ahead_of_acks(
    settings: Any,
) -> None:
    """A client that reads nothing stalls the engine at the window, never overflowing the channel."""
    settings.TTS_CHUNK_WINDOW = 4
    settings.TTS_WS_MAX_FRAME_MS = 20
    send = Recorder()
    job = TtsJob(
        submit("x" * 200), FakeTts(), send
    )  # 2 s of audio → 100 frames of 20 ms
    task = asyncio.create_task(job.run())
    await asyncio.sleep(0.2)
    assert len(send.of("gpu.tts.chunk")) == 4  # at most the window unacknowledged
    job.ack(TtsAck(job_id="j1", seq=3))
    await asyncio.sleep(0.1)
    assert len(send.of("gpu.tts.chunk")) == 8
    task.cancel()
    seqs = [m.seq for m in send.of("gpu.tts.chunk")]  # type: ignore[attr-defined]
    assert seqs == list(range(8))


async def test_cancel_frees_the_slot_within_200ms() -> None:
    registry = JobRegistry({"tts": 1, "asr": 1}, heartbeat_s=1.0)
    send = Recorder()
    job = TtsJob(submit("y" * 5000), FakeTts(chunk_delay_s=0.05), send)
    registry.start(job, send, accepted())
    await asyncio.sleep(0.1)
    assert not registry.has_room("tts")
    started = time.monotonic()
    registry.cancel("j1")
    assert registry.has_room("tts")
    await registry.wait_idle()
    assert time.monotonic() - started < 0.2
    assert not send.of("gpu.job.failed") and not send.of("gpu.tts.done")


async def test_a_failing_engine_replies_failed_with_a_code_and_frees_the_slot() -> None:
    class Broken(FakeTts):
        async def stream(self, req: Any) -> Any:  # type: ignore[override]
            raise RuntimeError("secret internal detail")
            yield  # pragma: no cover

    registry = JobRegistry({"tts": 1}, heartbeat_s=1.0)
    send = Recorder()
    registry.start(TtsJob(submit("boom"), Broken(), send), send, accepted())
    await registry.wait_idle()
    failed = send.of("gpu.job.failed")
    assert len(failed) == 1 and isinstance(failed[0], JobFailed)
    assert failed[0].code == "inference_failed" and "secret" not in repr(failed[0])
    assert registry.has_room("tts")


async def test_heartbeats_flow_while_a_job_runs() -> None:
    registry = JobRegistry({"tts": 1}, heartbeat_s=0.05)
    send = Recorder()
    registry.start(
        TtsJob(submit("z" * 100), FakeTts(chunk_delay_s=0.05), send), send, accepted()
    )
    await asyncio.sleep(0.3)
    assert len(send.of("gpu.job.heartbeat")) >= 3
    registry.cancel("j1")
    await registry.wait_idle()


def test_messages_hide_text_and_audio_from_repr() -> None:
    message = submit("private customer text")
    assert "private" not in repr(message)


@pytest.mark.parametrize("cls", [TtsSubmit])
def test_messages_round_trip_through_msgpack(cls: type[TtsSubmit]) -> None:
    import msgpack

    message = submit("hello")
    wire = msgpack.unpackb(msgpack.packb(message.to_message()), raw=False)
    assert cls.from_message(wire) == message
