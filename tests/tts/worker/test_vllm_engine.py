"""The vLLM engine on the tiny checkpoint, driven directly (engines §3.5, §5; tts AU7, R6, Z2).

The engine is loaded once per session (tests/tts/conftest.py ``vllm_tts``); these tests compare
its audio with the token stream vLLM generates for the same prompt and seed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import pytest

from tts.orpheus.snac_tokens import (
    END_OF_HUMAN,
    END_OF_SPEECH,
    FRAME_TOKENS,
    START_OF_AI,
    START_OF_HUMAN,
    START_OF_SPEECH,
)
from tts.worker.engines.base import TtsEngineRequest
from tts.worker.engines.snac_window import SAMPLES_PER_FRAME

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="session"),
]


async def audio_of(engine: Any, req: TtsEngineRequest) -> np.ndarray:
    chunks = [pcm async for pcm in engine.stream(req)]
    return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)


async def raw_tokens(engine: Any, req: TtsEngineRequest) -> list[int]:
    """The ids vLLM itself generates for the engine's prompt and sampling parameters."""
    prompt = engine.prompt(req)
    params = engine.sampling_params(req, len(prompt))
    ids: list[int] = []
    async for out in engine.llm.generate(
        {"prompt_token_ids": prompt}, params, request_id=f"raw-{time.time_ns()}"
    ):
        ids += out.outputs[0].token_ids
    return ids


async def test_tts_veena_prompt_is_the_card_recipe(
    vllm_tts: Any, tiny_orpheus: Any
) -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tiny_orpheus.model / "tokenizer.json"))
    text = tokenizer.encode("<spk_kavya> Hello world.", add_special_tokens=False).ids
    req = TtsEngineRequest(text="Hello world.", voice="kavya")
    assert vllm_tts.engine.prompt(req) == [
        START_OF_HUMAN,
        *text,
        END_OF_HUMAN,
        START_OF_AI,
        START_OF_SPEECH,
    ]
    assert (
        tokenizer.token_to_id("<spk_kavya>") in text
    )  # one voice token, not its letters


async def test_tts_au7_audio_is_exactly_the_frames_vllm_generated(
    vllm_tts: Any,
) -> None:
    engine = vllm_tts.engine
    for seed, text in ((11, "Hello world."), (12, "A journey of a thousand miles.")):
        req = TtsEngineRequest(text=text, voice="agastya", seed=seed)
        ids = await raw_tokens(engine, req)
        audio = await audio_of(engine, req)
        stopped = bool(ids) and ids[-1] == END_OF_SPEECH
        frames = (len(ids) - stopped) // FRAME_TOKENS
        assert req.stats.tokens == len(ids)
        assert req.stats.snac_frames == frames
        assert (req.stats.frames_dropped, req.stats.tokens_ignored) == (0, 0)
        assert req.stats.truncated is not stopped
        assert audio.size == frames * SAMPLES_PER_FRAME
        assert audio.dtype == np.float32 and np.all(np.abs(audio) <= 1.0)


async def test_word_timestamps_are_estimated_before_the_first_audio(
    vllm_tts: Any,
) -> None:
    from tts.worker.engines.word_marks import estimate_marks

    engine = vllm_tts.engine
    req = TtsEngineRequest(
        text="Hello there, world.", voice="kavya", seed=5, word_timestamps=True
    )
    stream = engine.stream(req)
    try:
        await anext(stream)
    except StopAsyncIteration:
        pass  # the tiny checkpoint may say nothing: the words are there before anyway
    finally:
        await stream.aclose()
    assert req.words == estimate_marks(req.text, rate=engine.native_rate)
    assert [w.word for w in req.words] == ["Hello", "there", "world"]


async def test_tts_r6_a_seed_reproduces_the_audio(vllm_tts: Any) -> None:
    engine = vllm_tts.engine
    make = lambda seed: TtsEngineRequest(text="Hello there.", voice="kavya", seed=seed)  # noqa: E731
    first, again, other = [await audio_of(engine, make(s)) for s in (3, 3, 4)]
    np.testing.assert_array_equal(first, again)
    assert first.size != other.size or not np.array_equal(first, other)


async def test_tts_request_fields_map_onto_sampling_params(vllm_tts: Any) -> None:
    from vllm.sampling_params import RequestOutputKind

    req = TtsEngineRequest(
        text="Hello world.",
        voice="kavya",
        temperature=0.4,
        top_k=-1,
        top_p=0.9,
        repetition_penalty=1.1,
        max_tokens=5000,
        seed=77,
    )
    params = vllm_tts.engine.sampling_params(req, prompt_len=20)
    assert (params.temperature, params.top_p, params.repetition_penalty) == (
        0.4,
        0.9,
        1.1,
    )
    assert params.top_k in (0, -1) and params.seed == 77
    assert params.max_tokens == 126  # the segment's budget, below the request's 5000
    assert params.stop_token_ids == [END_OF_SPEECH, 128_262]
    assert params.detokenize is False
    assert params.output_kind == RequestOutputKind.DELTA
    assert params.extra_args == {
        "snac_slot_order": True,
        "snac_stop_ids": [128258, 128262],
    }


async def test_tts_sampling_fields_reach_vllm(vllm_tts: Any) -> None:
    """temperature 0 is greedy (the seed no longer matters); max_tokens bounds a segment."""
    engine = vllm_tts.engine
    greedy = [
        await raw_tokens(
            engine,
            TtsEngineRequest(text="Hello.", voice="kavya", temperature=0, seed=s),
        )
        for s in (1, 2)
    ]
    assert greedy[0] == greedy[1]
    req = TtsEngineRequest(text="Hello world.", voice="kavya", max_tokens=17, seed=5)
    audio = await audio_of(engine, req)
    assert req.stats.tokens <= 17 and audio.size == req.stats.snac_frames * 2048
    assert req.stats.tokens < 17 or req.stats.truncated


async def test_tts_z2_closing_the_stream_aborts_the_vllm_request(vllm_tts: Any) -> None:
    engine = vllm_tts.engine
    req = TtsEngineRequest(text="Hello world. " * 12, voice="kavya", max_tokens=1500)
    stream = engine.stream(req)
    await anext(stream)
    before = set(engine.log.aborted)
    assert engine.llm.get_num_unfinished_requests() == 1
    await stream.aclose()
    (aborted,) = set(engine.log.aborted) - before
    assert engine.llm.get_num_unfinished_requests() == 0
    assert engine.log.aborted[aborted] <= 200
    assert req.stats.tokens < 1500


async def test_tts_z2_cancelling_the_consumer_aborts_the_vllm_request(
    vllm_tts: Any,
) -> None:
    engine = vllm_tts.engine
    req = TtsEngineRequest(text="Hello world. " * 12, voice="kavya", max_tokens=1500)
    started = asyncio.Event()

    async def consume() -> None:
        async for _ in engine.stream(req):
            started.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 60)
    before = set(engine.log.aborted)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(set(engine.log.aborted) - before) == 1
    assert engine.llm.get_num_unfinished_requests() == 0


async def test_tts_concurrent_segments_share_one_batched_decoder(vllm_tts: Any) -> None:
    engine = vllm_tts.engine
    calls, windows = engine.batcher.counters.calls, engine.batcher.counters.windows
    reqs = [
        TtsEngineRequest(text="Hello world.", voice="vinaya", seed=s) for s in range(8)
    ]
    audio = await asyncio.gather(*(audio_of(engine, r) for r in reqs))
    for req, pcm in zip(reqs, audio, strict=True):
        assert pcm.size == req.stats.snac_frames * SAMPLES_PER_FRAME
    c = engine.batcher.counters
    assert c.calls - calls < c.windows - windows
