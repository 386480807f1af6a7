"""ASR input formats, shared by both processes, and the loudness test of trailing audio.

Decoding and resampling a session's input is the gateway's front end (``asr.front_end``)."""

from __future__ import annotations

from typing import Literal

import numpy as np

from gateway.pcm import Int16

INPUT_RATES = (16000, 24000, 48000)
G711_RATE = 8000
InputFormat = Literal["audio/pcm", "audio/pcmu", "audio/pcma"]
INPUT_FORMATS: tuple[InputFormat, ...] = ("audio/pcm", "audio/pcmu", "audio/pcma")


LOUDNESS_FRAME = 320  # 20 ms at the model rate


def loud_end(pcm: Int16, offset: int, threshold_dbfs: float) -> int | None:
    """End of the last 20 ms frame of ``pcm`` whose RMS reaches ``threshold_dbfs``.

    ``offset`` is the position of ``pcm[0]``; None when every frame is quieter (silence).
    """
    if not len(pcm):
        return None
    threshold = 32768.0 * 10 ** (threshold_dbfs / 20)
    starts = np.arange(0, len(pcm), LOUDNESS_FRAME)
    energy = np.add.reduceat(pcm.astype(np.float64) ** 2, starts)
    lengths = np.diff(np.append(starts, len(pcm)))
    loud = np.flatnonzero(np.sqrt(energy / lengths) >= threshold)
    if not len(loud):
        return None
    return offset + min(len(pcm), (int(loud[-1]) + 1) * LOUDNESS_FRAME)
