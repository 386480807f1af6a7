"""The real faster-whisper engine on Piper speech: accuracy, words, prefix, cancel."""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
import soxr

from asr.whisper import MODEL_RATE
from asr.worker.engines.base import (
    NEW_TOKENS_MIN,
    NEW_TOKENS_PER_S,
    AsrDecodeRequest,
    Pcm,
)
from asr.worker.engines.faster_whisper import FasterWhisperAsr
from tests.wer import word_error_rate
from tts.worker.engines.base import TtsEngineRequest
from tts.worker.engines.piper import PiperTts

pytestmark = pytest.mark.slow

TEXT = (
    "Hello world. This is a test of the speech gateway. "
    "The quick brown fox jumps over the lazy dog."
)
CANCEL_DEADLINE_S = 0.2


async def piper_audio(text: str) -> Pcm:
    """Synthesize ``text`` with Piper and resample it to the model rate."""
    engine = PiperTts.load()
    try:
        req = TtsEngineRequest(text=text, voice=engine.default_voice)
        chunks = [chunk async for chunk in engine.stream(req)]
    finally:
        engine.close()
    audio = soxr.resample(np.concatenate(chunks), engine.native_rate, MODEL_RATE)
    return np.asarray(audio, dtype=np.float32)


@pytest.fixture(scope="module")
def speech() -> Pcm:
    """Piper's reading of ``TEXT`` at 16 kHz."""
    return asyncio.run(piper_audio(TEXT))


@pytest.fixture(scope="module")
def whisper() -> Iterator[FasterWhisperAsr]:
    """The engine, loaded once for the module."""
    engine = FasterWhisperAsr.load()
    yield engine
    engine.close()


def test_faster_whisper_metadata(whisper: FasterWhisperAsr) -> None:
    assert whisper.name == "faster_whisper"
    assert whisper.model_version == "faster-whisper/whisper-tiny.en"


async def test_decode_of_piper_speech_has_wer_at_most_10_percent(
    whisper: FasterWhisperAsr, speech: Pcm
) -> None:
    hyp = await whisper.decode(AsrDecodeRequest(audio=speech))

    assert word_error_rate(TEXT, hyp.text) <= 0.10
    assert hyp.words == ()


async def test_sa6_word_timestamps_end_in_increasing_order(
    whisper: FasterWhisperAsr, speech: Pcm
) -> None:
    hyp = await whisper.decode(AsrDecodeRequest(audio=speech, word_timestamps=True))

    ends = [word.end for word in hyp.words]
    assert len(ends) >= 10
    assert ends == sorted(ends) and ends[0] < ends[-1]
    assert all(word.start <= word.end for word in hyp.words)
    assert ends[-1] <= len(speech) / MODEL_RATE + 0.5
    assert word_error_rate(TEXT, "".join(word.text for word in hyp.words)) <= 0.10


@pytest.mark.parametrize("prefix", [" Hello", " Hello world. This is a", "Greetings"])
async def test_sa3_hypothesis_includes_forced_prefix_once(
    whisper: FasterWhisperAsr, speech: Pcm, prefix: str
) -> None:
    hyp = await whisper.decode(AsrDecodeRequest(audio=speech, prefix=prefix))

    forced = prefix.strip()
    assert hyp.text.startswith(forced)
    assert not hyp.text[len(forced) :].lstrip(" ,.").startswith(forced)


async def test_sa3_prefix_matching_the_audio_keeps_the_transcript_exact(
    whisper: FasterWhisperAsr, speech: Pcm
) -> None:
    hyp = await whisper.decode(AsrDecodeRequest(audio=speech, prefix=" Hello world."))

    assert word_error_rate(TEXT, hyp.text) <= 0.10


@pytest.mark.parametrize("prefix", ["", " Hello world."])
async def test_it10_token_logprobs_are_the_decodes_own_and_spell_the_generated_text(
    whisper: FasterWhisperAsr, speech: Pcm, prefix: str
) -> None:
    """Issue 34: CTranslate2's per-step logits give each generated token's log
    probability; the tokens spell the text after the forced prefix, which has none."""
    hyp = await whisper.decode(
        AsrDecodeRequest(audio=speech, prefix=prefix, logprobs=True)
    )
    spelled = "".join(t.text for t in hyp.tokens)
    assert spelled.strip() and hyp.text.endswith(spelled.strip())
    assert len(hyp.text) - len(spelled.strip()) >= len(prefix.strip())
    assert all(math.isfinite(t.logprob) and t.logprob <= 0 for t in hyp.tokens)
    assert sum(t.logprob for t in hyp.tokens) < 0  # not placeholders
    plain = await whisper.decode(AsrDecodeRequest(audio=speech, prefix=prefix))
    assert plain.tokens == () and plain.text == hyp.text


async def test_segments_carry_whispers_times_and_confidence(
    whisper: FasterWhisperAsr, speech: Pcm
) -> None:
    hyp = await whisper.decode(AsrDecodeRequest(audio=speech, segments=True))
    assert hyp.segments
    assert "".join(s.text for s in hyp.segments).strip() == hyp.text
    ends = [0.0]
    for segment in hyp.segments:
        assert ends[-1] <= segment.start < segment.end <= len(speech) / MODEL_RATE + 0.5
        ends.append(segment.end)
        assert segment.avg_logprob < 0 and 0 < segment.no_speech_prob < 1
        assert segment.compression_ratio > 0 and segment.tokens


async def test_wk9_cancelled_decode_returns_control_within_200_ms(
    whisper: FasterWhisperAsr, speech: Pcm
) -> None:
    long_audio = np.tile(speech, 20)  # several 30 s windows
    task = asyncio.create_task(whisper.decode(AsrDecodeRequest(audio=long_audio)))
    await asyncio.sleep(0.1)
    assert not task.done()

    cancelled_at = time.monotonic()
    task.cancel()
    await asyncio.wait({task})

    assert task.cancelled()
    assert time.monotonic() - cancelled_at < CANCEL_DEADLINE_S


def idle_threads() -> set[int]:
    """Native ids of this process's threads in the idle scheduling class."""
    ids = {int(tid) for tid in os.listdir("/proc/self/task")}
    return {tid for tid in ids if os.sched_getscheduler(tid) == os.SCHED_IDLE}


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling classes")
async def test_wk6_chunk_decodes_run_on_idle_priority_threads_only(
    whisper: FasterWhisperAsr, speech: Pcm
) -> None:
    final = await whisper.decode(AsrDecodeRequest(audio=speech))
    chunk = await whisper.decode(AsrDecodeRequest(audio=speech, background=True))

    idle = idle_threads()
    assert idle, "the chunk model's CTranslate2 threads run at idle priority"
    assert threading.get_native_id() not in idle
    python_threads = {t.native_id for t in threading.enumerate()}
    assert not idle & python_threads  # no Python thread can starve holding the GIL
    assert chunk.text == final.text  # the same model, only scheduled differently


def test_context_frames_cover_the_audio_and_its_padding() -> None:
    """Issue 13: a chunk decode encodes its audio, 2 s of padding, at least context_s."""
    from asr.worker.engines.faster_whisper import context_frames

    assert context_frames(16_000, None) is None  # full 30 s
    assert context_frames(16_000, 10.0) == 1000  # 1 s of audio: the 10 s floor
    assert context_frames(16_000 * 9, 10.0) == 1100  # 9 s + 2 s padding
    assert context_frames(16_000 * 28, 10.0) is None  # 30 s anyway
    assert context_frames(16_001 * 9, 10.0) % 2 == 0  # the encoder halves it


async def test_a_short_context_chunk_decode_transcribes_and_says_so(
    whisper: FasterWhisperAsr, speech: Pcm
) -> None:
    """Issue 13: a chunk decode with context_s encodes less than 30 s and marks it; a final
    (not background) ignores context_s; word times still come."""
    short = await whisper.decode(
        AsrDecodeRequest(
            audio=speech, background=True, context_s=10.0, word_timestamps=True
        )
    )
    full = await whisper.decode(AsrDecodeRequest(audio=speech, context_s=10.0))

    assert not short.full_context and full.full_context
    assert word_error_rate(TEXT, short.text) <= 0.10
    assert short.words and short.words[-1].end <= len(speech) / MODEL_RATE + 0.5


async def test_a_final_decode_forced_into_a_loop_stops_at_the_token_bound(
    whisper: FasterWhisperAsr, speech: Pcm
) -> None:
    """Issue 13: a wrong confirmed prefix ("A L O W …" for "Hello world") sent a final decode
    on to Whisper's 448 tokens of "L L L"; every decode stops at new_token_limit."""
    hyp = await whisper.decode(AsrDecodeRequest(audio=speech, prefix="A L O W L L L"))

    bound = NEW_TOKENS_MIN + NEW_TOKENS_PER_S * len(speech) // MODEL_RATE
    assert hyp.text.startswith("A L O W L L L")
    assert 0 < hyp.completion_tokens <= bound < 100


@pytest.mark.parametrize("background", [True, False])
async def test_a_long_prompt_and_prefix_leave_room_for_a_full_window(
    whisper: FasterWhisperAsr, speech: Pcm, background: bool
) -> None:
    """A session prompt at ASR_MAX_PROMPT_CHARS and a forced prefix beside 28 s of audio (a
    chunk decode at the window's edge): faster-whisper refused the decode (prompt + new
    tokens over 448) and the session ended with inference_failed."""
    audio = np.tile(speech, 28 * MODEL_RATE // len(speech) + 1)[: 28 * MODEL_RATE]
    prompt = ("Lighthouse, keeper, harbour, Kratch. " * 60)[:2000]
    req = AsrDecodeRequest(
        audio=audio,
        prompt=prompt,
        prefix=" Hello world, this is a test of the speech gateway.",
        background=background,
        context_s=10.0,
    )
    hyp = await whisper.decode(req)

    assert hyp.text.startswith("Hello world, this is a test of the speech gateway.")
    assert hyp.prompt_tokens + hyp.completion_tokens <= 448


async def test_the_hypothesis_names_the_language_decoded(
    whisper: FasterWhisperAsr, speech: Pcm
) -> None:
    """Told none, faster-whisper settles the language itself; the bundled checkpoint is
    English-only, so it decodes English even when told another (and says so)."""
    detected = await whisper.decode(AsrDecodeRequest(audio=speech, language=None))
    assert detected.language == "en"
    told = await whisper.decode(AsrDecodeRequest(audio=speech, language="de"))
    assert told.language == "en"
