"""The worker's TTS job (docs/specs/tts-ws.md T8, §9.2, C2, Z2, Q6, Q8, AU9) with a fake engine."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from gateway.contracts import Message
from tts.messages import (
    TtsAck,
    TtsChunk,
    TtsClear,
    TtsDone,
    TtsEnd,
    TtsFlush,
    TtsFlushed,
    TtsSubmit,
    TtsText,
)
from tts.worker.engines.base import Pcm, TtsEngineRequest
from tts.worker.engines.fake import FakeTts
from tts.worker.jobs import TtsJob


class Recorder:
    """A reply sender that records messages (and acks everything, like a live gateway)."""

    def __init__(self, job: TtsJob | None = None) -> None:
        self.sent: list[Message] = []
        self.job = job

    async def __call__(self, message: Message) -> None:
        self.sent.append(message)
        if self.job is not None and isinstance(message, TtsChunk):
            self.job.ack(TtsAck(job_id=message.job_id, seq=message.seq))

    def chunks(self) -> list[TtsChunk]:
        return [m for m in self.sent if isinstance(m, TtsChunk)]

    def kinds(self) -> list[str]:
        return [type(m).__name__ for m in self.sent]


class Traced(FakeTts):
    """The fake engine, noting when each segment starts and when its stream stops."""

    def __init__(self, chunk_delay_s: float = 0.0) -> None:
        super().__init__(chunk_delay_s)
        self.started: list[tuple[str, float]] = []
        self.stopped: list[float] = []
        self.leading: list[bool] = []

    async def stream(self, req: TtsEngineRequest) -> AsyncIterator[Pcm]:
        self.started.append((req.text, time.monotonic()))
        self.leading.append(req.leading)
        try:
            async for pcm in super().stream(req):
                yield pcm
        finally:
            self.stopped.append(time.monotonic())


def segments(*texts: str, first: int = 0) -> list[dict[str, Any]]:
    out, at = [], 0
    for i, text in enumerate(texts):
        out.append(
            {
                "seq": first + i,
                "text": text,
                "char_start": at,
                "char_end": at + len(text),
            }
        )
        at += len(text)
    return out


def submit(*texts: str, incremental: bool = False, **kw: Any) -> TtsSubmit:
    return TtsSubmit(
        job_id="j1",
        reply_channel="reply",
        deadline=time.time() + 5,
        voice="tone",
        segments=segments(*texts),
        incremental=incremental,
        **kw,
    )


def make_job(sub: TtsSubmit, engine: FakeTts) -> tuple[TtsJob, Recorder]:
    recorder = Recorder()
    job = TtsJob(sub, engine, recorder)
    recorder.job = job
    return job, recorder


async def wait_for(predicate: Any, timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.002)


async def test_tts_t8_first_audio_leaves_before_later_segments_are_synthesised() -> (
    None
):
    engine = Traced(chunk_delay_s=0.01)
    job, sent = make_job(submit("a" * 50, "b" * 50, "c" * 50), engine)
    task = asyncio.create_task(job.run())
    await wait_for(lambda: sent.chunks())
    assert len(engine.started) == 1  # segment 1 not started yet: audio is already out
    await task
    assert [text[0] for text, _ in engine.started] == ["a", "b", "c"]
    assert isinstance(sent.sent[-1], TtsDone)


@pytest.mark.parametrize("incremental", [False, True])
async def test_tts_t1_the_worker_normalises_each_segment_as_it_starts_it(
    incremental: bool,
) -> None:
    engine = Traced()
    texts = ("It costs $5.50. ", "Dr. Smith is **here**.")
    sent = texts[:1] if incremental else texts
    job, _ = make_job(submit(*sent, incremental=incremental), engine)
    task = asyncio.create_task(job.run())
    if incremental:  # §9.2: the second segment comes in tts.job.text
        await wait_for(lambda: engine.started)
        later = segments(texts[1], first=1)
        job.text(TtsText(job_id="j1", epoch=0, segments=later))
        job.end(TtsEnd(job_id="j1", epoch=0))
    await task
    assert [text for text, _ in engine.started] == [
        "It costs five dollars and fifty cents.",
        "Doctor Smith is here.",
    ]


async def test_tts_t5_normalize_false_reaches_the_engine_verbatim() -> None:
    engine = Traced()
    texts = ("It costs $5.50. ", "Dr. Smith is **here**.")
    job, _ = make_job(submit(*texts, normalize=False), engine)
    await job.run()
    assert [text for text, _ in engine.started] == list(texts)


async def test_only_the_segment_the_first_audio_waits_for_is_leading() -> None:
    engine = Traced()
    job, _ = make_job(submit("a" * 50, "b" * 50, "c" * 50), engine)
    await job.run()
    assert engine.leading == [True, False, False]


async def test_tts_q6_chunks_are_numbered_without_gaps_and_done_counts_them() -> None:
    job, sent = make_job(
        submit("x" * 120, "y" * 80, sample_rate=24000, format="pcm"), FakeTts()
    )
    await job.run()
    chunks = sent.chunks()
    assert [c.seq for c in chunks] == list(range(len(chunks)))
    done = sent.sent[-1]
    assert isinstance(done, TtsDone) and done.chunks == len(chunks)
    assert (
        done.samples
        == sum(c.samples for c in chunks)
        == sum(len(c.data) // 2 for c in chunks)
    )
    assert abs(done.samples - 24 * 10 * 200) <= 2  # 2 s of tone at 24 kHz


async def test_tts_ts1_each_segment_has_one_start_and_one_end_frame() -> None:
    job, sent = make_job(submit("a" * 40, "b" * 60, "c" * 30), FakeTts())
    await job.run()
    chunks = sent.chunks()
    assert [c.segment_seq for c in chunks if c.segment_start] == [0, 1, 2]
    assert [c.segment_seq for c in chunks if c.segment_end] == [0, 1, 2]
    for c in chunks:  # frames of one segment are contiguous
        assert c.segment_seq in (0, 1, 2)
    seqs = [c.segment_seq for c in chunks]
    assert seqs == sorted(seqs)


async def test_tts_au9_pause_between_segments(settings: Any) -> None:
    settings.TTS_SEGMENT_PAUSE_MS = 80
    job, sent = make_job(
        submit("a" * 20, "b" * 20, sample_rate=22050, format="pcm"), FakeTts()
    )
    await job.run()
    pcm = np.frombuffer(b"".join(c.data for c in sent.chunks()), dtype="<i2")
    assert (
        abs(pcm.size - (2 * 4410 + 1764)) <= 1
    )  # 2 × 200 ms of tone + one 80 ms pause
    assert not pcm[4410 : 4410 + 1764].any()


async def test_tts_i4_i5_incremental_text_flush_and_end() -> None:
    job, sent = make_job(submit(incremental=True), FakeTts())
    task = asyncio.create_task(job.run())
    await asyncio.sleep(0.01)
    assert not sent.sent  # waits for text
    job.text(TtsText(job_id="j1", epoch=0, segments=segments("a" * 30)))
    job.flush(TtsFlush(job_id="j1", epoch=0, flush_id="f1"))
    await wait_for(lambda: any(isinstance(m, TtsFlushed) for m in sent.sent))
    flushed_at = next(i for i, m in enumerate(sent.sent) if isinstance(m, TtsFlushed))
    assert all(not isinstance(m, TtsChunk) for m in sent.sent[flushed_at:])
    assert sent.chunks()[-1].segment_end  # the flushed text's audio is complete
    job.text(TtsText(job_id="j1", epoch=0, segments=segments("b" * 20, first=1)))
    job.end(TtsEnd(job_id="j1", epoch=0))
    await asyncio.wait_for(task, 2)
    assert isinstance(sent.sent[-1], TtsDone)
    assert [c.segment_seq for c in sent.chunks() if c.segment_start] == [0, 1]


async def test_tts_c2_clear_drops_queued_text_stops_the_engine_and_starts_an_epoch() -> (
    None
):
    engine = Traced(chunk_delay_s=0.02)
    job, sent = make_job(submit("a" * 300, "b" * 300, incremental=True), engine)
    task = asyncio.create_task(job.run())
    await wait_for(lambda: len(sent.chunks()) >= 3)
    cleared_at = time.monotonic()
    job.clear(TtsClear(job_id="j1", epoch=1))
    await wait_for(lambda: engine.stopped)
    assert engine.stopped[0] - cleared_at < 0.2  # Z2 for clear
    before = len(sent.chunks())
    job.text(TtsText(job_id="j1", epoch=1, segments=segments("c" * 20, first=2)))
    job.end(TtsEnd(job_id="j1", epoch=1))
    await asyncio.wait_for(task, 2)
    assert [text[0] for text, _ in engine.started] == ["a", "c"]  # "b" was dropped
    after = sent.chunks()[before:]
    assert after and all(c.epoch == 1 for c in after)
    assert after[0].segment_start and after[0].segment_seq == 2
    first = np.frombuffer(after[0].data, dtype="<i2")
    assert abs(int(first[0])) < 200  # the new epoch fades in


async def test_tts_c2_text_of_an_old_epoch_is_ignored() -> None:
    engine = Traced()
    job, sent = make_job(submit(incremental=True), engine)
    job.clear(TtsClear(job_id="j1", epoch=1))
    job.text(TtsText(job_id="j1", epoch=0, segments=segments("late")))
    job.end(TtsEnd(job_id="j1", epoch=1))
    await asyncio.wait_for(job.run(), 2)
    assert engine.started == [] and not sent.chunks()


async def test_tts_z2_cancel_stops_engine_work_within_200_ms() -> None:
    engine = Traced(chunk_delay_s=0.05)
    job, sent = make_job(submit("z" * 5000), engine)
    task = asyncio.create_task(job.run())
    await wait_for(lambda: len(sent.chunks()) >= 2)
    cancelled_at = time.monotonic()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await wait_for(lambda: engine.stopped, timeout=0.5)
    assert engine.stopped[0] - cancelled_at < 0.2
    count = len(sent.chunks())
    await asyncio.sleep(0.1)
    assert len(sent.chunks()) == count and not any(
        isinstance(m, TtsDone) for m in sent.sent
    )


async def test_tts_q8_the_job_never_runs_more_than_the_window_ahead(
    settings: Any,
) -> None:
    settings.TTS_CHUNK_WINDOW = 4
    sent = Recorder()  # acknowledges nothing
    job = TtsJob(submit("w" * 300), FakeTts(), sent)
    task = asyncio.create_task(job.run())
    await asyncio.sleep(0.05)
    assert len(sent.chunks()) == 4
    job.ack(TtsAck(job_id="j1", seq=1))
    await asyncio.sleep(0.05)
    assert len(sent.chunks()) == 6
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize("fmt", ["wav", "pcm", "mulaw"])
async def test_tts_au3_au4_job_frames_at_the_requested_rate(fmt: str) -> None:
    rate = 8000 if fmt == "mulaw" else 44100
    job, sent = make_job(submit("q" * 100, format=fmt, sample_rate=rate), FakeTts())
    await job.run()
    width = 1 if fmt == "mulaw" else 2
    chunks = sent.chunks()
    assert all(c.data and len(c.data) % width == 0 for c in chunks)
    assert max(c.samples for c in chunks) <= rate // 5
    assert abs(sum(c.samples for c in chunks) - rate) <= 2  # 1 s of audio
