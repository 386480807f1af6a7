"""Shared helpers of the SNAC tests: random frames and a whole-segment decode."""

from __future__ import annotations

import random
from typing import Any

from tts.orpheus.snac_tokens import CODEBOOK_SIZE, FRAME_TOKENS, Frame
from tts.worker.engines.base import Pcm
from tts.worker.engines.snac_window import FrameStore, Window


def random_frames(n: int, seed: int = 0) -> list[Frame]:
    """``n`` frames of uniform random codes."""
    rng = random.Random(seed)
    return [
        tuple(rng.randrange(CODEBOOK_SIZE) for _ in range(FRAME_TOKENS))  # type: ignore[misc]
        for _ in range(n)
    ]


def decode_whole(codec: Any, frames: list[Frame], seed: int = 0) -> Pcm:
    """All frames in one decode call: the reference a stitched stream is compared with."""
    store = FrameStore(seed=seed, noise_lengths=codec.noise_lengths, left=2)
    store.append(frames)
    n = len(frames)
    return codec.decode([store.window_input(Window(0, n, 0, n))])[0]
