"""Cut a file's audio into pieces the ASR worker decodes one item each.

Whisper sees 30 s at a time; a piece is at most ``MAX_PIECE_S`` (the streaming window), and
ends at the first pause of ``PAUSE_S`` after ``MIN_PIECE_S`` of audio, else at the quietest
``QUIET_S`` of its second half. Pieces with no frame above the silence gate are skipped (Whisper
invents text for silence). Each piece is one item of the worker job; its Whisper segments
are ``verbose_json``'s, moved to file times (``openai_rest.transcripts``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from asr.whisper import MODEL_RATE

FRAME = MODEL_RATE // 50  # 20 ms
MAX_PIECE_S = 28.0
MIN_PIECE_S = 5.0
PAUSE_S = 0.5
QUIET_S = 0.2
FLOOR_RMS = 100.0  # int16 units: below this a frame is silent whatever the file's level


@dataclass(frozen=True)
class Piece:
    """Samples ``[start, end)`` of the file."""

    start: int
    end: int

    @property
    def start_s(self) -> float:
        """Start in seconds."""
        return self.start / MODEL_RATE

    @property
    def end_s(self) -> float:
        """End in seconds."""
        return self.end / MODEL_RATE


def frame_rms(pcm: npt.NDArray[np.int16]) -> npt.NDArray[np.float64]:
    """RMS of each 20 ms frame (the last partial frame included)."""
    padded = np.zeros(-(-len(pcm) // FRAME) * FRAME, dtype=np.float64)
    padded[: len(pcm)] = pcm
    frames = padded.reshape(-1, FRAME)
    return np.sqrt((frames**2).mean(axis=1))


def split_pieces(pcm: npt.NDArray[np.int16]) -> list[Piece]:
    """The pieces of ``pcm`` to transcribe, in order."""
    rms = frame_rms(pcm)
    if not len(rms):
        return []
    gate = max(FLOOR_RMS, 0.1 * float(np.percentile(rms, 90)))
    silent = rms < gate
    max_f, min_f = int(MAX_PIECE_S * 50), int(MIN_PIECE_S * 50)
    pause_f, quiet_f = int(PAUSE_S * 50), int(QUIET_S * 50)
    cuts: list[int] = []
    start, n = 0, len(rms)
    while n - start > min_f + pause_f:
        cut = _pause_cut(
            silent, start + min_f, min(start + max_f, n - pause_f), pause_f
        )
        if cut is None:
            if n - start <= max_f:
                break
            cut = _quietest(rms, start + max_f // 2, start + max_f, quiet_f)
        cuts.append(cut)
        start = cut
    bounds = [0, *cuts, n]
    pieces = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        if b > a and not silent[a:b].all():
            pieces.append(Piece(a * FRAME, min(b * FRAME, len(pcm))))
    return pieces


def _pause_cut(silent: npt.NDArray[np.bool_], lo: int, hi: int, run: int) -> int | None:
    """The middle of the first run of ``run`` silent frames starting in ``[lo, hi)``."""
    count = 0
    for index in range(lo, min(hi + run, len(silent))):
        count = count + 1 if silent[index] else 0
        if count >= run:
            return index - run // 2
    return None


def _quietest(rms: npt.NDArray[np.float64], lo: int, hi: int, width: int) -> int:
    """The middle of the quietest ``width`` frames within ``[lo, hi)``."""
    window = np.convolve(rms[lo:hi], np.ones(width), mode="valid")
    return lo + int(np.argmin(window)) + width // 2
