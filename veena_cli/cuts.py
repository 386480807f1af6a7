"""Where ``veena transcribe`` commits: at pauses, and never later than a fixed window.

Each item (one commit, one transcript) is cut from the audio ahead of the send position: the
first pause of at least ``PAUSE_S`` once the item is ``MIN_ITEM_S`` long, else the longest
pause in the window, else the window's end (``MAX_ITEM_S``, under Whisper's 30 s). A pause is a
run of 20 ms frames whose level lies well below the loud frames of the window, so it adapts to
the recording's own level. The same levels give each item's speech extent for subtitle times.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FRAME_S = 0.02
MIN_ITEM_S = 4.0
MAX_ITEM_S = 28.0
PAUSE_S = 0.3
SHORT_PAUSE_S = 0.1
SPEECH_PAD_S = 0.1
QUIET_DB = -35.0  # a frame below this level may be a pause…
RANGE_DB = 30.0  # …if it also lies this far below the window's loud frames…
FLOOR_DB = -60.0  # …and a frame below this level always is


@dataclass(frozen=True)
class Cut:
    """An item of ``length`` samples whose speech spans ``[speech_start, speech_end)``."""

    length: int
    speech_start: int
    speech_end: int

    @property
    def has_speech(self) -> bool:
        """Whether any frame of the item is loud enough to be speech."""
        return self.speech_end > self.speech_start


def frame_levels(pcm: npt.NDArray[np.int16], frame: int) -> npt.NDArray[np.float64]:
    """dBFS of each whole ``frame``-sample frame of ``pcm``."""
    count = len(pcm) // frame
    x = pcm[: count * frame].astype(np.float64).reshape(count, frame) / 32768.0
    rms = np.sqrt(np.mean(x * x, axis=1)) if count else np.zeros(0)
    return np.asarray(20 * np.log10(rms + 1e-9))


def pause_level(levels: npt.NDArray[np.float64]) -> float:
    """The level below which a frame of this window is a pause (adapts to the recording)."""
    loud = float(np.percentile(levels, 95))
    return max(FLOOR_DB, min(QUIET_DB, loud - RANGE_DB))


def pause_runs(quiet: npt.NDArray[np.bool_]) -> list[tuple[int, int]]:
    """``[start, end)`` frame runs where ``quiet`` holds."""
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for i, q in enumerate(quiet):
        if q and start is None:
            start = i
        elif not q and start is not None:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, len(quiet)))
    return runs


def choose_cut(pcm: npt.NDArray[np.int16], rate: int, *, final: bool) -> Cut:
    """The next item from the start of ``pcm`` (``final``: no audio follows ``pcm``)."""
    frame, limit = int(rate * FRAME_S), int(rate * MAX_ITEM_S)
    levels = frame_levels(pcm[:limit], frame)
    last = final and len(pcm) <= limit  # the rest of the file fits in this item
    length = len(pcm) if last else limit
    if len(levels):
        pauses = pause_runs(levels < pause_level(levels))
        if last:  # a pause at the very end is no reason to cut
            pauses = [r for r in pauses if r[1] < len(levels)]
        first = int(MIN_ITEM_S / FRAME_S)
        long = [r for r in pauses if r[1] > first and r[1] - r[0] >= PAUSE_S / FRAME_S]
        short = [r for r in pauses if r[1] - r[0] >= SHORT_PAUSE_S / FRAME_S]
        if long:
            length = max(first, sum(long[0]) // 2) * frame
        elif short and not last:
            widest = max(short, key=lambda r: r[1] - r[0])
            length = max(1, sum(widest) // 2) * frame
    return Cut(length, *speech_extent(levels, frame, length, rate))


def speech_extent(
    levels: npt.NDArray[np.float64], frame: int, length: int, rate: int
) -> tuple[int, int]:
    """``[start, end)`` in samples of the non-pause frames within the first ``length``."""
    count = length // frame
    if not count:
        return 0, 0
    voiced = np.flatnonzero(levels[:count] >= pause_level(levels))
    if not len(voiced):
        return 0, 0
    pad = int(rate * SPEECH_PAD_S)
    start = max(0, int(voiced[0]) * frame - pad)
    end = min(length, (int(voiced[-1]) + 1) * frame + pad)
    return start, end
