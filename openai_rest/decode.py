"""Decode an uploaded audio file (WAV, MP3, FLAC, Ogg/Opus, M4A, WebM: whatever FFmpeg reads)
to 16 kHz mono PCM16 with PyAV, stopping as soon as the file is longer than allowed.

Runs in a thread (it is CPU work); raises ``UnreadableAudio`` or ``AudioTooLong``.
"""

from __future__ import annotations

from typing import IO

import av
import numpy as np
import numpy.typing as npt

from asr.engines.base import MODEL_RATE

Pcm16 = npt.NDArray[np.int16]


class UnreadableAudio(Exception):
    """The file is no audio FFmpeg can decode (or has no audio stream)."""


class AudioTooLong(Exception):
    """The file's audio is longer than the cap."""


def decode_upload(file: IO[bytes], *, max_seconds: float) -> Pcm16:
    """The whole file as 16 kHz mono int16 samples."""
    limit = int(max_seconds * MODEL_RATE)
    try:
        container = av.open(file, mode="r")
    except (av.FFmpegError, OSError, ValueError):
        raise UnreadableAudio from None
    try:
        if not container.streams.audio:
            raise UnreadableAudio
        stream = container.streams.audio[0]
        resampler = av.AudioResampler(format="s16", layout="mono", rate=MODEL_RATE)
        blocks: list[Pcm16] = []
        total = 0
        for frame in container.decode(stream):
            for out in resampler.resample(frame):
                block = out.to_ndarray().reshape(-1).astype(np.int16, copy=False)
                blocks.append(block)
                total += len(block)
            if total > limit:
                raise AudioTooLong
        for out in resampler.resample(None):
            blocks.append(out.to_ndarray().reshape(-1).astype(np.int16, copy=False))
    except (av.FFmpegError, OSError, ValueError):
        raise UnreadableAudio from None
    finally:
        container.close()
    pcm = np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int16)
    if len(pcm) > limit:
        raise AudioTooLong
    if not len(pcm):
        raise UnreadableAudio
    return pcm
