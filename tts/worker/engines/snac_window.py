"""Which SNAC frames to decode together, and which samples of each decode to keep (engines §5.4).

Pure code (numpy only). Frame k is decoded with frames ``[k − L, k + R]`` where they exist and
only its own 2048 samples are kept, so N frames in give exactly N × 2048 samples out, each frame
once, the first and the last included. When frames arrive faster than the decoder runs, one
window emits several frames (``L + k + R`` frames for k emitted); k is a power of two so the
windows of concurrent streams come in few distinct lengths and batch together.

The decoder's noise is positional: each frame's noise is drawn from a generator seeded by
(stream seed, noise layer, frame index), so a window decode sees the same noise at the same
sample positions as a whole-segment decode, whatever the window or batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tts.orpheus.snac_tokens import FRAME_TOKENS, Frame

SAMPLES_PER_FRAME = 2048
CONTEXT_LEFT = 2
CONTEXT_RIGHT = 2
MAX_STEP = 8

Codes = npt.NDArray[np.int64]  # (frames, 7): the codes of consecutive frames
Noise = list[
    npt.NDArray[np.float32]
]  # one array per noise layer, (samples of that layer,)


@dataclass(frozen=True)
class Window:
    """Decode frames ``[start, stop)``; keep the samples of frames ``[emit_start, emit_stop)``."""

    start: int
    stop: int
    emit_start: int
    emit_stop: int

    @property
    def frames(self) -> int:
        """Frames decoded."""
        return self.stop - self.start

    @property
    def keep(self) -> slice:
        """The emitted frames' samples within the decoded audio."""
        first = (self.emit_start - self.start) * SAMPLES_PER_FRAME
        return slice(
            first, first + (self.emit_stop - self.emit_start) * SAMPLES_PER_FRAME
        )


class WindowPlanner:
    """Frames arrive, windows leave; every frame is emitted exactly once, in order."""

    def __init__(
        self,
        left: int = CONTEXT_LEFT,
        right: int = CONTEXT_RIGHT,
        max_step: int = MAX_STEP,
    ) -> None:
        assert left >= 0 and right >= 0 and max_step >= 1
        self.left, self.right, self.max_step = left, right, max_step
        self.available = 0  # frames received
        self.emitted = 0  # frames planned for emission

    def add(self, frames: int) -> list[Window]:
        """Take ``frames`` more frames; return the windows whose right context is complete."""
        self.available += frames
        windows = []
        while (ready := self.available - self.right - self.emitted) > 0:
            windows.append(
                self._window(_power_of_two_at_most(min(ready, self.max_step)))
            )
        return windows

    def finish(self) -> list[Window]:
        """End of the segment: the frames left (no right context exists) in one window."""
        rest = self.available - self.emitted
        return [self._window(rest)] if rest > 0 else []

    def _window(self, count: int) -> Window:
        first = self.emitted
        self.emitted += count
        return Window(
            start=max(0, first - self.left),
            stop=min(self.available, self.emitted + self.right),
            emit_start=first,
            emit_stop=self.emitted,
        )


def _power_of_two_at_most(n: int) -> int:
    return 1 << (n.bit_length() - 1)


def layer_lengths(decoder_rates: Sequence[int], latent_per_frame: int) -> list[int]:
    """Samples per frame at the output of each upsampling block (where the noise is added)."""
    lengths, length = [], latent_per_frame
    for rate in decoder_rates:
        length *= rate
        lengths.append(length)
    return lengths


class FrameStore:
    """One segment's frames and their noise, kept only while a window may still need them."""

    def __init__(
        self, *, seed: int, noise_lengths: Sequence[int] | None, left: int
    ) -> None:
        self.seed = seed
        self.noise_lengths = list(noise_lengths) if noise_lengths else []
        self.left = left
        self._codes: dict[int, Frame] = {}
        self._noise: dict[int, Noise] = {}
        self.count = 0

    def append(self, frames: Sequence[Frame]) -> None:
        """Store the next frames in order."""
        for frame in frames:
            assert len(frame) == FRAME_TOKENS
            self._codes[self.count] = frame
            self.count += 1

    def window_input(self, window: Window) -> tuple[Codes, Noise | None]:
        """The codes of a window, and its noise (None when the decoder has no noise)."""
        ids = range(window.start, window.stop)
        codes = np.array([self._codes[i] for i in ids], dtype=np.int64)
        noise = None
        if self.noise_lengths:
            per_frame = [self._frame_noise(i) for i in ids]
            noise = [
                np.concatenate([frame[layer] for frame in per_frame])
                for layer in range(len(self.noise_lengths))
            ]
        self._forget_before(window.emit_stop - self.left)
        return codes, noise

    def _frame_noise(self, index: int) -> Noise:
        if index not in self._noise:
            self._noise[index] = [
                np.random.default_rng((self.seed, layer, index))
                .standard_normal(length)
                .astype(np.float32)
                for layer, length in enumerate(self.noise_lengths)
            ]
        return self._noise[index]

    def _forget_before(self, first_needed: int) -> None:
        for index in [i for i in self._codes if i < first_needed]:
            del self._codes[index]
            self._noise.pop(index, None)


def snac_levels(codes: Codes) -> tuple[Codes, Codes, Codes]:
    """Frames' codes as SNAC's three levels, shapes (n,), (2n,), (4n,) (engines §5.1)."""
    l0 = codes[:, 0]
    l1 = codes[:, [1, 4]].reshape(-1)
    l2 = codes[:, [2, 3, 5, 6]].reshape(-1)
    return l0, l1, l2
