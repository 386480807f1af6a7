"""Streaming SNAC windows (engines §5.4, tts AU7, AU10) with a decoder of known reach.

``ReachCodec`` stands in for SNAC: each frame's 2048 samples depend on the codes of the frames up
to two away, and frames outside the decoded window count as silence, as in a convolutional
decoder. A stitched stream equals its whole-segment decode exactly only when every emitted frame
had its two neighbours on each side in its window, so a missing context frame, a lost, repeated
or shifted frame all show up as a difference. The real decoder is in test_snac_decoder.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.tts.worker.snac_support import decode_whole as whole
from tests.tts.worker.snac_support import random_frames
from tts.orpheus.snac_tokens import FRAME_TOKENS, FrameParser, frame_ids
from tts.worker.engines.base import Pcm
from tts.worker.engines.snac_decoder import SnacBatcher, SnacStream
from tts.worker.engines.snac_window import (
    SAMPLES_PER_FRAME,
    Codes,
    FrameStore,
    Noise,
    Window,
    WindowPlanner,
)

REACH = (0.05, 0.2, 1.0, 0.3, 0.07)  # weights of frames k-2 … k+2


class ReachCodec:
    """A decoder whose frame k depends on frames k-2 … k+2 of the window it is given."""

    noise_lengths = None

    def __init__(self) -> None:
        self.calls: list[list[int]] = []  # window lengths per call

    def decode(self, windows: Sequence[tuple[Codes, Noise | None]]) -> list[Pcm]:
        self.calls.append([codes.shape[0] for codes, _ in windows])
        return [self._one(codes) for codes, _ in windows]

    def _one(self, codes: Codes) -> Pcm:
        value = codes.sum(axis=1).astype(np.float64) / (7 * 4096)
        padded = np.concatenate([np.zeros(2), value, np.zeros(2)])
        mixed = np.convolve(padded, REACH[::-1], mode="valid")
        ramp = np.linspace(0.0, 1.0, SAMPLES_PER_FRAME)
        return np.concatenate([m * ramp for m in mixed]).astype(np.float32)


def planned(n: int, arrivals: list[int], **kw: int) -> list[Window]:
    planner = WindowPlanner(**kw)
    windows, left = [], n
    for k in arrivals:
        k = min(k, left)
        left -= k
        windows += planner.add(k)
    windows += planner.add(left)
    return windows + planner.finish()


@pytest.mark.parametrize("n", [1, 2, 3, 12, 117])
@pytest.mark.parametrize("arrival", [1, 3, 7, 1000])
def test_tts_au10_every_frame_once_in_order_with_two_frames_of_context(
    n: int, arrival: int
) -> None:
    # engines §5.5: canopyai (frame 0 and the last two lost), basetenlabs (frame 9 twice),
    # taresh18 / Lex-au (empty first chunk, frames repeated), Veena server (no right context).
    windows = planned(n, [arrival] * n)
    emitted = [k for w in windows for k in range(w.emit_start, w.emit_stop)]
    assert emitted == list(range(n))
    for w in windows:
        assert w.emit_stop > w.emit_start  # never an empty chunk
        assert w.start == max(0, w.emit_start - 2)
        assert w.stop == min(n, w.emit_stop + 2)
        assert w.emit_stop - w.emit_start in (1, 2, 4, 8) or w is windows[-1]


@given(
    a=st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=30),
    b=st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=30),
)
def test_tts_r6_one_frame_steps_make_windows_independent_of_token_timing(
    a: list[int], b: list[int]
) -> None:
    """TTS_SNAC_MAX_STEP=1: the same frames give the same windows however they arrive."""
    assert planned(40, a, max_step=1) == planned(40, b, max_step=1)


def test_tts_au10_first_frame_leaves_after_three_frames_21_tokens() -> None:
    planner = WindowPlanner()
    assert planner.add(1) == [] and planner.add(1) == []
    assert planner.add(1) == [Window(start=0, stop=3, emit_start=0, emit_stop=1)]


@pytest.mark.parametrize("n", [1, 2, 3, 12, 117])
def test_tts_au7_stitched_stream_equals_whole_segment_decode(n: int) -> None:
    codec = ReachCodec()
    frames = random_frames(n, seed=n)
    store, planner = FrameStore(seed=0, noise_lengths=None, left=2), WindowPlanner()
    out = []
    for i in range(0, n, 3):
        store.append(frames[i : i + 3])
        for w in planner.add(len(frames[i : i + 3])):
            out.append(codec.decode([store.window_input(w)])[0][w.keep])
    for w in planner.finish():
        out.append(codec.decode([store.window_input(w)])[0][w.keep])
    stitched = np.concatenate(out)
    assert stitched.size == n * SAMPLES_PER_FRAME
    np.testing.assert_array_equal(stitched, whole(codec, frames))


def test_tts_au10_one_frame_of_context_is_not_enough_for_this_reach() -> None:
    """The check above can fail: L = R = 1 (the common 28-token window) differs."""
    codec, frames = ReachCodec(), random_frames(12)
    store = FrameStore(seed=0, noise_lengths=None, left=1)
    store.append(frames)
    planner = WindowPlanner(left=1, right=1, max_step=1)
    windows = planner.add(12) + planner.finish()
    out = [codec.decode([store.window_input(w)])[0][w.keep] for w in windows]
    assert not np.array_equal(np.concatenate(out), whole(codec, frames))


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=30),
    deltas=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=12),
    tail=st.integers(min_value=0, max_value=6),
)
def test_tts_au7_tokens_to_samples_for_any_delta_sizes(
    n: int, deltas: list[int], tail: int
) -> None:
    """Parser, windows and a shared batcher: N frames → N × 2048 samples, equal to whole."""
    frames = random_frames(n + 1, seed=n)
    tokens = [t for f in frames[:n] for t in frame_ids(f)] + frame_ids(frames[n])[:tail]
    codec = ReachCodec()
    batcher = SnacBatcher(codec, timeout_s=0.0)  # type: ignore[arg-type]
    try:
        audio = asyncio.run(stream_tokens(batcher, tokens, deltas))
    finally:
        batcher.close()
    assert audio.size == n * SAMPLES_PER_FRAME
    if n:
        np.testing.assert_array_equal(audio, whole(codec, frames[:n]))


async def stream_tokens(
    batcher: SnacBatcher, tokens: list[int], deltas: list[int]
) -> Pcm:
    parser, snac = FrameParser(), SnacStream(batcher, seed=1)
    out: list[Pcm] = []
    i = 0
    while i < len(tokens):
        size = deltas[len(out) % len(deltas)]
        out += await snac.push(parser.feed(tokens[i : i + size]))
        i += size
    parser.finish()
    out += await snac.finish()
    assert parser.counters.frames * FRAME_TOKENS <= len(tokens)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


def test_snac_batcher_decodes_concurrent_streams_together() -> None:
    """8 streams: fewer decoder calls than windows, each stream's audio as if alone."""
    codec = ReachCodec()
    batcher = SnacBatcher(codec, max_batch=64, timeout_s=0.05)  # type: ignore[arg-type]
    streams = [random_frames(12, seed=s) for s in range(8)]
    tokens = [[t for f in frames for t in frame_ids(f)] for frames in streams]

    async def all_streams() -> list[Pcm]:
        return await asyncio.gather(
            *(stream_tokens(batcher, t, [FRAME_TOKENS]) for t in tokens)
        )

    try:
        audio = asyncio.run(all_streams())
    finally:
        batcher.close()
    c = batcher.counters
    assert c.windows == sum(len(planned(12, [1] * 12)) for _ in streams)
    assert c.calls < c.windows
    assert max(c.batch_sizes) > 1
    for frames, pcm in zip(streams, audio, strict=True):
        np.testing.assert_array_equal(pcm, whole(codec, frames))
