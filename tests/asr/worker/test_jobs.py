"""The worker's ASR job with the fake engine: buffers, cadence, resync, failures, cancel (§13–§14)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import numpy as np
import pytest

from asr.messages import (
    DELTAS,
    AsrAudio,
    AsrCommit,
    AsrDelta,
    AsrDrop,
    AsrFinal,
    AsrItemOpen,
    AsrOpen,
    AsrResync,
)
from asr.worker.engines.fake import FakeAsr, fake_transcript
from asr.worker.gate import DecodeGate
from asr.worker.jobs import AsrJob
from gateway.contracts import JobFailed, Message

SECOND = 16000


class Recorder:
    def __init__(self) -> None:
        self.sent: list[Message] = []

    async def __call__(self, message: Message) -> None:
        self.sent.append(message)

    def of(self, kind: type) -> list:
        return [m for m in self.sent if isinstance(m, kind)]


def make_job(engine: FakeAsr) -> tuple[AsrJob, Recorder, asyncio.Task[None]]:
    rec = Recorder()
    job = AsrJob(
        AsrOpen(job_id="j", reply_channel="r", deadline=0.0, model="m"), engine, rec
    )
    return job, rec, asyncio.create_task(job.run())


def audio(seq: int, offset: int, samples: int) -> AsrAudio:
    pcm = (np.ones(samples) * 1000).astype("<i2").tobytes()
    return AsrAudio(job_id="j", item_seq=seq, offset=offset, pcm=pcm)


def open_(seq: int, **kw: object) -> AsrItemOpen:
    return AsrItemOpen(job_id="j", item_seq=seq, **kw)


async def settle(rec: Recorder, kind: type, count: int = 1, timeout: float = 3) -> None:
    deadline = time.monotonic() + timeout
    while len(rec.of(kind)) < count:
        assert time.monotonic() < deadline, rec.sent
        await asyncio.sleep(0.005)


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_asr_sa5_streamed_deltas_then_final_join_to_the_transcript() -> None:
    job, rec, task = make_job(FakeAsr())
    job.item_open(open_(0, stream=True))
    for i in range(30):  # 6 s in 200 ms messages
        job.audio(audio(0, i * 3200, 3200))
        await asyncio.sleep(0.002)
    job.commit(AsrCommit(job_id="j", item_seq=0, total_samples=6 * SECOND))
    await settle(rec, AsrFinal)
    deltas = rec.of(AsrDelta)
    assert deltas and deltas[0].text == "alpha"
    final = rec.of(AsrFinal)[0]
    assert "".join(d.text for d in deltas) + final.text == fake_transcript(6)
    assert final.audio_ms == 6000 and final.completion_tokens == 6
    await stop(task)


async def test_asr_wk6_offset_gap_asks_for_a_resync_once() -> None:
    job, rec, task = make_job(FakeAsr())
    job.item_open(open_(0))
    job.audio(audio(0, 0, 3200))
    job.audio(audio(0, 6400, 3200))  # 3200..6400 went missing
    job.audio(audio(0, 9600, 3200))
    await settle(rec, AsrResync)
    await asyncio.sleep(0.02)
    assert [(m.item_seq, m.have_samples) for m in rec.of(AsrResync)] == [(0, 3200)]
    for offset in (3200, 6400, 9600):
        job.audio(audio(0, offset, 3200))
    job.commit(AsrCommit(job_id="j", item_seq=0, total_samples=12800))
    await settle(rec, AsrFinal)
    assert job.items == {}
    await stop(task)


async def test_asr_wk6_commit_beyond_the_buffer_waits_for_the_audio() -> None:
    job, rec, task = make_job(FakeAsr())
    job.item_open(open_(0))
    job.audio(audio(0, 0, SECOND))
    job.commit(AsrCommit(job_id="j", item_seq=0, total_samples=2 * SECOND))
    await settle(rec, AsrResync)
    assert rec.of(AsrFinal) == []
    job.audio(audio(0, SECOND, SECOND))
    await settle(rec, AsrFinal)
    assert rec.of(AsrFinal)[0].text == fake_transcript(2)
    await stop(task)


async def test_asr_wk8_chunk_failure_reports_stage_chunk() -> None:
    engine = FakeAsr()
    engine.failures = 1
    job, rec, task = make_job(engine)
    job.item_open(open_(3, stream=True))
    job.audio(audio(3, 0, SECOND))
    await settle(rec, JobFailed)
    failed = rec.of(JobFailed)[0]
    assert (failed.stage, failed.item_seq, failed.code) == (
        "chunk",
        3,
        "inference_failed",
    )
    await stop(task)


async def test_asr_wk8_final_is_retried_once_then_fails_the_item_only() -> None:
    engine = FakeAsr()
    engine.failures = 1
    job, rec, task = make_job(engine)
    job.item_open(open_(0))
    job.audio(audio(0, 0, SECOND))
    job.commit(AsrCommit(job_id="j", item_seq=0, total_samples=SECOND))
    await settle(rec, AsrFinal)  # the retry succeeded
    engine.failures = 2
    job.item_open(open_(1))
    job.audio(audio(1, 0, SECOND))
    job.commit(AsrCommit(job_id="j", item_seq=1, total_samples=SECOND))
    await settle(rec, JobFailed)
    assert (rec.of(JobFailed)[0].stage, rec.of(JobFailed)[0].item_seq) == ("final", 1)
    job.item_open(open_(2))
    job.audio(audio(2, 0, SECOND))
    job.commit(AsrCommit(job_id="j", item_seq=2, total_samples=SECOND))
    await settle(rec, AsrFinal, 2)
    await stop(task)


async def test_asr_sa2_slow_decodes_are_coalesced_not_queued() -> None:
    engine = FakeAsr(delay_s=0.2)
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    for i in range(25):  # 5 s of audio in 50 ms
        job.audio(audio(0, i * 3200, 3200))
        await asyncio.sleep(0.002)
    await asyncio.sleep(0.5)
    assert 1 <= len(engine.calls) <= 3
    assert len(engine.calls[-1].audio) == 5 * SECOND  # the latest state was decoded
    await stop(task)


async def test_asr_sa7_commit_cancels_the_chunk_decode_in_flight() -> None:
    engine = FakeAsr(delay_s=0.3)
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    job.audio(audio(0, 0, 2 * SECOND))
    await asyncio.sleep(0.05)
    started = time.monotonic()
    job.commit(AsrCommit(job_id="j", item_seq=0, total_samples=2 * SECOND))
    await settle(rec, AsrFinal)
    assert time.monotonic() - started < 0.5  # not 0.3 (chunk) + 0.3 (final)
    assert rec.of(AsrDelta) == []
    await stop(task)


async def test_asr_wk9_cancel_ends_every_task_within_200_ms() -> None:
    engine = FakeAsr(delay_s=5)
    job, rec, task = make_job(engine)
    for seq in range(3):
        job.item_open(open_(seq, stream=True))
        job.audio(audio(seq, 0, 2 * SECOND))
    await asyncio.sleep(0.05)
    before = len(asyncio.all_tasks())
    started = time.monotonic()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert time.monotonic() - started < 0.2
    assert len(asyncio.all_tasks()) <= before - 1 - 3
    assert job.items == {}


async def test_asr_wk4_drop_forgets_the_item() -> None:
    engine = FakeAsr(delay_s=0.2)
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    job.audio(audio(0, 0, SECOND))
    job.drop(AsrDrop(job_id="j", item_seq=0))
    job.audio(audio(0, SECOND, SECOND))  # late audio of a dropped item is ignored
    await asyncio.sleep(0.3)
    assert job.items == {} and rec.sent == []
    await stop(task)


async def use(
    gate: DecodeGate, order: list[str], name: str, *, final: bool, hold: float = 0
) -> None:
    async with gate.slot(final=final):
        order.append(name)
        await asyncio.sleep(hold)


async def test_asr_wk6_final_decodes_jump_the_queue() -> None:
    gate, order = DecodeGate(1), []
    first = asyncio.create_task(use(gate, order, "chunk-1", final=False, hold=0.05))
    await asyncio.sleep(0.01)
    waiting = [
        asyncio.create_task(use(gate, order, "chunk-2", final=False)),
        asyncio.create_task(use(gate, order, "final", final=True)),
    ]
    await asyncio.gather(first, *waiting)
    assert order == ["chunk-1", "final", "chunk-2"]
    assert gate.busy == {True: 0, False: 0}


async def test_asr_wk6_a_final_never_waits_for_a_running_chunk_decode() -> None:
    gate, order = DecodeGate(1), []
    chunk = asyncio.create_task(use(gate, order, "chunk", final=False, hold=10))
    await asyncio.sleep(0.01)

    await asyncio.wait_for(use(gate, order, "final", final=True), timeout=1)

    assert order == ["chunk", "final"] and not chunk.done()
    await stop(chunk)
    assert gate.busy == {True: 0, False: 0}


async def test_asr_wk6_chunk_decodes_wait_while_a_final_waits() -> None:
    gate, order = DecodeGate(1), []
    first = asyncio.create_task(use(gate, order, "final-1", final=True, hold=0.05))
    await asyncio.sleep(0.01)
    second = asyncio.create_task(use(gate, order, "final-2", final=True, hold=0.05))
    await asyncio.sleep(0.01)
    chunk = asyncio.create_task(use(gate, order, "chunk", final=False))
    await asyncio.sleep(0.01)
    assert order == ["final-1"]  # the chunk slot is free, but a final is waiting

    await asyncio.gather(first, second, chunk)

    assert order == ["final-1", "final-2", "chunk"]


async def test_asr_wk6_a_cancelled_waiter_gives_its_turn_away() -> None:
    gate, order = DecodeGate(1), []
    first = asyncio.create_task(use(gate, order, "final-1", final=True, hold=0.05))
    await asyncio.sleep(0.01)
    gone = asyncio.create_task(use(gate, order, "final-2", final=True))
    chunk = asyncio.create_task(use(gate, order, "chunk", final=False))
    await asyncio.sleep(0.01)
    await stop(gone)

    await asyncio.wait_for(chunk, timeout=1)  # no longer held back by a waiting final

    assert order == ["final-1", "chunk"]
    await first
    assert gate.busy == {True: 0, False: 0}


async def test_asr_wk6_chunk_decodes_ask_for_background_priority(
    settings: Any,
) -> None:
    settings.ASR_FINAL_REUSE = (
        False  # the chunk covered it all: it would complete the item
    )
    engine = FakeAsr()
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    job.audio(audio(0, 0, 2 * SECOND))
    await asyncio.sleep(0.05)
    job.commit(AsrCommit(job_id="j", item_seq=0, total_samples=2 * SECOND))
    await settle(rec, AsrFinal)

    assert [call.background for call in engine.calls] == [True, False]
    await stop(task)


@pytest.mark.parametrize("logprobs", [False, True])
async def test_asr_it10_logprobs_only_when_asked(logprobs: bool) -> None:
    job, rec, task = make_job(FakeAsr())
    job.item_open(open_(0, logprobs=logprobs))
    job.audio(audio(0, 0, 2 * SECOND))
    job.commit(AsrCommit(job_id="j", item_seq=0, total_samples=2 * SECOND))
    await settle(rec, AsrFinal)
    final = rec.of(AsrFinal)[0]
    if logprobs:
        assert [e["token"] for e in final.logprobs] == ["alpha", " bravo"]
        assert all(e["logprob"] <= 0 for e in final.logprobs)
    else:
        assert final.logprobs is None
    await stop(task)


class ContextAsr(FakeAsr):
    """The fake engine, its hypotheses' ``full_context`` decided by ``full(request)``; by
    default a decode that asked for a shortened encoder context says it had one."""

    def __init__(self, full: Any = lambda req: req.context_s is None) -> None:
        super().__init__()
        self.full = full

    async def decode(self, req: Any) -> Any:
        hyp = await super().decode(req)
        return dataclasses.replace(hyp, full_context=self.full(req))


@pytest.mark.parametrize("context_s", [10.0, 30.0])
async def test_only_chunk_decodes_ask_for_a_short_context_and_never_stand_in_for_a_final(
    settings: Any, context_s: float
) -> None:
    """Issue 13: ASR_CHUNK_CONTEXT_S shortens chunk decodes only, and a final is always a
    full-context decode's transcript (30: chunk decodes are full too, and one is reused)."""
    settings.ASR_CHUNK_CONTEXT_S = context_s
    engine = ContextAsr()
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    job.audio(audio(0, 0, 2 * SECOND))
    await asyncio.sleep(0.05)  # the chunk decode of all 2 s has finished
    job.commit(AsrCommit(job_id="j", item_seq=0, total_samples=2 * SECOND))
    await settle(rec, AsrFinal)

    if context_s < 30:
        assert [(c.background, c.context_s) for c in engine.calls] == [
            (True, 10.0),
            (False, None),
        ]
    else:  # the full-context chunk decode covered the audio: it completes the item
        assert [(c.background, c.context_s) for c in engine.calls] == [(True, None)]
    text = "".join(d.text for d in rec.of(AsrDelta)) + rec.of(AsrFinal)[0].text
    assert text == fake_transcript(2)
    await stop(task)


# Issue 13: the final decode is skipped when the last chunk decode covered every sound.


def quiet(seq: int, offset: int, samples: int) -> AsrAudio:
    pcm = bytes(2 * samples)
    return AsrAudio(job_id="j", item_seq=seq, offset=offset, pcm=pcm)


def commit(total: int) -> AsrCommit:
    return AsrCommit(job_id="j", item_seq=0, total_samples=total)


async def test_a_chunk_decode_that_covered_all_speech_completes_the_item() -> None:
    engine = FakeAsr()
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    job.audio(audio(0, 0, 2 * SECOND))
    job.audio(quiet(0, 2 * SECOND, SECOND // 2))
    await asyncio.sleep(0.05)  # the chunk decode of all 2.5 s has finished
    job.commit(commit(2 * SECOND + SECOND // 2))
    await settle(rec, AsrFinal)

    # one decode only; it started after a pause, so at final priority
    assert [call.background for call in engine.calls] == [False]
    text = "".join(d.text for d in rec.of(AsrDelta)) + rec.of(AsrFinal)[0].text
    assert text == fake_transcript(2)
    await stop(task)


async def test_speech_after_the_last_chunk_decode_needs_the_final_decode() -> None:
    engine = FakeAsr()
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    job.audio(audio(0, 0, 2 * SECOND))
    await asyncio.sleep(0.05)
    job.audio(audio(0, 2 * SECOND, SECOND // 2))  # less than a chunk, no pause
    job.commit(commit(2 * SECOND + SECOND // 2))
    await settle(rec, AsrFinal)

    assert [call.background for call in engine.calls] == [True, False]
    await stop(task)


async def test_a_pause_after_speech_starts_a_chunk_decode_that_completes_the_item() -> (
    None
):
    engine = FakeAsr()
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    job.audio(audio(0, 0, 3 * SECOND // 2))
    await asyncio.sleep(0.05)  # decoded 1.5 s
    job.audio(audio(0, 3 * SECOND // 2, SECOND // 2))  # speech to 2.0 s
    job.audio(quiet(0, 2 * SECOND, SECOND // 4))  # 250 ms pause
    await asyncio.sleep(0.05)
    assert [call.background for call in engine.calls] == [True, False]
    job.commit(commit(2 * SECOND + SECOND // 4))
    await settle(rec, AsrFinal)

    assert len(engine.calls) == 2
    text = "".join(d.text for d in rec.of(AsrDelta)) + rec.of(AsrFinal)[0].text
    assert text == fake_transcript(2)
    await stop(task)


@pytest.mark.parametrize(
    "setting", [("ASR_FINAL_REUSE", False), ("ASR_PAUSE_DECODE_S", 0.0)]
)
async def test_reuse_and_pause_decodes_are_settings(
    settings: Any, setting: tuple[str, object]
) -> None:
    setattr(settings, *setting)
    # The 0.75 s after the first decode is no chunk: only a pause decode covers it.
    settings.ASR_CHUNK_S = 1.0
    engine = FakeAsr()
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    job.audio(audio(0, 0, 3 * SECOND // 2))
    await asyncio.sleep(0.05)
    job.audio(audio(0, 3 * SECOND // 2, SECOND // 2))
    job.audio(quiet(0, 2 * SECOND, SECOND // 4))
    await asyncio.sleep(0.05)
    job.commit(commit(2 * SECOND + SECOND // 4))
    await settle(rec, AsrFinal)

    assert engine.calls[-1].background is False  # a full final decode ran
    await stop(task)


@pytest.mark.parametrize(
    ("name", "value", "state_field", "expected"),
    [
        ("ASR_AGREE_S", 0.3, "agree_samples", 3 * SECOND // 10),
        ("ASR_AGREE_FOLLOWED", 2, "agree_followed", 2),
        ("ASR_AGREE_FOLLOWED", 0, "agree_followed", 0),
        ("ASR_AGREE_FOLLOWED_BOTH_S", 1.5, "followed_both_samples", 3 * SECOND // 2),
    ],
)
async def test_agreement_settings_reach_each_item(
    settings: Any, name: str, value: object, state_field: str, expected: int
) -> None:
    setattr(settings, name, value)
    job, _rec, task = make_job(FakeAsr())
    job.item_open(open_(0, stream=True, transcript=DELTAS))
    assert getattr(job.items[0].state, state_field) == expected
    await stop(task)


async def test_a_final_items_preview_never_waits_for_the_words_after_in_both(
    settings: Any,
) -> None:
    """``ASR_AGREE_FOLLOWED_BOTH_S`` is the rule of an item whose deltas are its transcript;
    a ``final`` item's transcript replaces its preview, which never waits for it (issue 34)."""
    settings.ASR_AGREE_FOLLOWED_BOTH_S = 2.0
    job, _rec, task = make_job(FakeAsr())
    job.item_open(open_(0, stream=True))
    job.item_open(open_(1, stream=True, transcript=DELTAS))
    assert job.items[0].state.followed_both_samples == 0
    assert job.items[1].state.followed_both_samples == 2 * SECOND
    await stop(task)


async def test_a_commit_waits_for_the_decode_of_the_pause_in_flight() -> None:
    engine = FakeAsr(delay_s=0.2)
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    job.audio(audio(0, 0, 2 * SECOND))
    job.audio(quiet(0, 2 * SECOND, SECOND // 2))
    await asyncio.sleep(0.05)  # the decode after the pause is running
    job.commit(commit(2 * SECOND + SECOND // 2))
    await settle(rec, AsrFinal)

    assert len(engine.calls) == 1  # not cancelled, not decoded again
    text = "".join(d.text for d in rec.of(AsrDelta)) + rec.of(AsrFinal)[0].text
    assert text == fake_transcript(2)
    await stop(task)


async def test_a_commit_still_cancels_a_chunk_decode_before_the_pause() -> None:
    engine = FakeAsr(delay_s=0.2)
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    job.audio(audio(0, 0, 2 * SECOND))
    await asyncio.sleep(0.05)  # a chunk decode of speech only is running
    job.audio(quiet(0, 2 * SECOND, SECOND // 2))
    job.commit(commit(2 * SECOND + SECOND // 2))
    await settle(rec, AsrFinal)

    assert [call.background for call in engine.calls] == [True, False]
    await stop(task)


@pytest.mark.parametrize(("min_s", "decodes"), [(0.25, 2), (1.0, 0)])
async def test_asr_chunk_min_s_is_the_cadence_while_no_other_decode_runs(
    settings: Any, min_s: float, decodes: int
) -> None:
    settings.ASR_CHUNK_MIN_S = min_s
    engine = FakeAsr()
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    for i in range(2):
        job.audio(audio(0, i * SECOND // 4, SECOND // 4))
        await asyncio.sleep(0.05)

    assert len(engine.calls) == decodes
    await stop(task)


async def test_asr_chunk_min_s_does_not_apply_while_another_decode_runs(
    settings: Any,
) -> None:
    settings.ASR_CHUNK_MIN_S = 0.25
    settings.ASR_CHUNK_MIN_FIRST_WORDS = False  # an item's first word: the test below
    engine = FakeAsr(delay_s=0.5)
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    job.item_open(open_(1, stream=True))
    job.audio(audio(1, 0, SECOND))  # item 1: a decode of 0.5 s starts
    await asyncio.sleep(0.05)
    for i in range(2):
        job.audio(audio(0, i * SECOND // 4, SECOND // 4))
        await asyncio.sleep(0.05)

    assert len(engine.calls) == 1  # item 0 waits for a full ASR_CHUNK_S
    await stop(task)


@pytest.mark.parametrize("committed", [True, False], ids=["final", "chunk"])
async def test_a_bug_in_an_item_s_loop_fails_the_item_instead_of_hanging_it(
    monkeypatch: pytest.MonkeyPatch, committed: bool
) -> None:
    """Any exception escaping an item's loop (not only a decode's) reaches the client."""

    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    engine = FakeAsr()
    job, rec, task = make_job(engine)
    monkeypatch.setattr(job, "_final" if committed else "_chunk", broken)
    job.item_open(open_(0, stream=True))
    job.audio(audio(0, 0, SECOND))
    if committed:
        job.commit(commit(SECOND))
    await settle(rec, JobFailed)
    failed = rec.of(JobFailed)[0]
    assert (failed.stage, failed.item_seq, failed.code) == (
        "final" if committed else "chunk",
        0,
        "inference_failed",
    )
    assert 0 not in job.items
    await stop(task)


async def test_audio_that_is_all_silence_since_the_last_decode_is_never_decoded(
    settings: Any,
) -> None:
    """Issue 13: at a 0.3 s idle cadence a decode of the silence after speech would often
    still run at the commit, and the completed event would wait for it."""
    settings.ASR_CHUNK_MIN_S = 0.3
    settings.ASR_PAUSE_DECODE_S = 0.2
    engine = FakeAsr()
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    offset = 0
    for piece in [quiet] * 10 + [audio] * 10 + [quiet] * 20:  # 1 s, 1 s speech, 2 s
        job.audio(piece(0, offset, SECOND // 10))
        offset += SECOND // 10
        await asyncio.sleep(0.03)
        if piece is quiet and offset == SECOND:
            assert not engine.calls, "leading silence was decoded"
        if offset == 2 * SECOND:
            await asyncio.sleep(0.1)
            during_speech = len(engine.calls)
            assert during_speech >= 1
    assert len(engine.calls) <= during_speech + 1  # the pause's decode at most
    job.commit(commit(offset))
    await settle(rec, AsrFinal)
    await stop(task)


@pytest.mark.parametrize("confirm", [True, False])
async def test_the_pause_decode_confirms_every_word_before_the_commit(
    settings: Any, confirm: bool
) -> None:
    """Issue 13: nothing after a pause can change its words, so the pause decode sends them
    all as deltas (ASR_PAUSE_CONFIRM); without it three words stay held back."""
    settings.ASR_PAUSE_CONFIRM = confirm
    engine = FakeAsr()
    before_commit, final = await speech_pause_commit(engine)

    assert before_commit == (fake_transcript(4) if confirm else fake_transcript(1))
    assert before_commit + final == fake_transcript(4)
    assert len(engine.calls) == 2  # the final reused the pause decode


async def speech_pause_commit(engine: FakeAsr) -> tuple[str, str]:
    """3.5 s of speech decoded, 0.5 s more, a 250 ms pause and its decode, then the commit:
    the deltas sent before the commit, and the final's text."""
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    job.audio(audio(0, 0, 7 * SECOND // 2))
    await asyncio.sleep(0.05)  # a chunk decode of 3.5 s of speech
    job.audio(audio(0, 7 * SECOND // 2, SECOND // 2))  # speech to 4.0 s
    job.audio(quiet(0, 4 * SECOND, SECOND // 4))  # 250 ms pause: its decode
    await asyncio.sleep(0.05)
    before_commit = "".join(d.text for d in rec.of(AsrDelta))
    job.commit(commit(4 * SECOND + SECOND // 4))
    await settle(rec, AsrFinal)
    await stop(task)
    return before_commit, rec.of(AsrFinal)[0].text


async def test_a_short_context_pause_decode_confirms_only_what_agrees(
    settings: Any,
) -> None:
    """Issue 13: ASR_PAUSE_CONFIRM trusts a pause decode whole only when it is a full-context
    decode (the one the final reuses); a short-context one goes through agreement."""
    settings.ASR_PAUSE_CONFIRM = True
    before_commit, final = await speech_pause_commit(ContextAsr(lambda req: False))

    assert before_commit == fake_transcript(1)  # three held back, as without confirm
    assert before_commit + final == fake_transcript(4)


@pytest.mark.parametrize(
    ("first_words", "slots", "emitted", "decodes"),
    [
        (True, 2, "", 2),  # no word shown yet and a chunk slot free: at once
        (False, 2, "", 1),  # off: a full ASR_CHUNK_S while another decode runs
        (True, 1, "", 1),  # every chunk slot busy
        (True, 2, "one", 1),  # the item already shows a word
    ],
)
async def test_asr_chunk_min_first_words_uses_a_free_slot_until_a_word_is_shown(
    settings: Any, first_words: bool, slots: int, emitted: str, decodes: int
) -> None:
    settings.ASR_CHUNK_MIN_S = 0.25
    settings.ASR_CHUNK_MIN_FIRST_WORDS = first_words
    engine = FakeAsr(delay_s=0.5)
    engine.decode_slots = slots
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True))
    job.item_open(open_(1, stream=True))
    job.items[0].state.emitted = emitted
    job.audio(audio(1, 0, SECOND))  # item 1: a decode of 0.5 s starts
    await asyncio.sleep(0.05)
    job.audio(audio(0, 0, SECOND // 4))
    await asyncio.sleep(0.05)

    assert len(engine.calls) == decodes
    await stop(task)


@pytest.mark.parametrize("transcript", ["final", "deltas"])
async def test_the_final_decode_of_each_transcript_option(transcript: str) -> None:
    """Issue 34: with "final" the final decode is the whole item, unforced, and its text is
    the transcript; with "deltas" it continues the shown words and the transcript is None
    (the deltas joined)."""
    engine = FakeAsr()
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True, prompt="Zulu", transcript=transcript))
    for i in range(30):  # 6 s in 200 ms messages
        job.audio(audio(0, i * 3200, 3200))
        await asyncio.sleep(0.002)
    await asyncio.sleep(0.05)
    shown = "".join(d.text for d in rec.of(AsrDelta))
    assert shown  # the preview streamed
    job.audio(audio(0, 6 * SECOND, SECOND))  # a last second of speech, then the commit
    job.commit(commit(7 * SECOND))
    await settle(rec, AsrFinal)
    final, request = rec.of(AsrFinal)[0], engine.calls[-1]
    assert not request.background and len(request.audio) == 7 * SECOND
    if transcript == "final":
        assert (request.prefix, request.prompt) == ("", "Zulu")
        assert final.transcript == fake_transcript(7)
    else:
        assert request.prefix == " " + shown and request.prompt.startswith("Zulu")
        assert final.transcript is None
    assert shown + final.text == fake_transcript(7)
    await stop(task)


@pytest.mark.parametrize("transcript", ["final", "deltas"])
async def test_the_pause_decode_is_the_final_decode_and_stands_in_for_it(
    transcript: str,
) -> None:
    """Issue 34: with "final", the decode after the speech pauses is a whole decode (from
    the start, unforced, at final priority) and the commit completes from it."""
    engine = FakeAsr()
    job, rec, task = make_job(engine)
    job.item_open(open_(0, stream=True, transcript=transcript, words=True))
    job.audio(audio(0, 0, 7 * SECOND // 2))
    await asyncio.sleep(0.05)
    job.audio(audio(0, 7 * SECOND // 2, SECOND // 2))
    job.audio(quiet(0, 4 * SECOND, SECOND // 4))  # the pause: its decode
    await asyncio.sleep(0.05)
    pause = engine.calls[-1]
    calls = len(engine.calls)
    job.commit(commit(4 * SECOND + SECOND // 4))
    await settle(rec, AsrFinal)
    final = rec.of(AsrFinal)[0]
    assert len(engine.calls) == calls  # reused
    assert not pause.background
    if transcript == "final":
        assert pause.prefix == "" and pause.word_timestamps
        assert final.transcript == fake_transcript(4)
        assert final.words is not None and len(final.words) == 4
    else:
        assert final.transcript is None and final.words is None
    await stop(task)


async def test_final_logprobs_cover_the_transcript() -> None:
    job, rec, task = make_job(FakeAsr())
    job.item_open(open_(0, logprobs=True))
    job.audio(audio(0, 0, 3 * SECOND))
    job.commit(commit(3 * SECOND))
    await settle(rec, AsrFinal)
    final = rec.of(AsrFinal)[0]
    assert final.transcript == fake_transcript(3)
    tokens = [e["token"] for e in final.transcript_logprobs]
    assert "".join(tokens) == final.transcript and len(tokens) == 3
    assert all(e["logprob"] < 0 for e in final.transcript_logprobs)
    await stop(task)
