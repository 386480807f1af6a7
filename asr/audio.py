"""Pure ASR input decoding: PCM16 and G.711 to 16 kHz int16, resampled statefully."""

from __future__ import annotations

from typing import Literal

import numpy as np

from asr.whisper import MODEL_RATE
from gateway.pcm import Float32, Int16, StreamResampler, alaw2lin, ulaw2lin

INPUT_RATES = (16000, 24000, 48000)
G711_RATE = 8000
InputFormat = Literal["audio/pcm", "audio/pcmu", "audio/pcma"]
INPUT_FORMATS: tuple[InputFormat, ...] = ("audio/pcm", "audio/pcmu", "audio/pcma")


def decode_pcm16(data: bytes) -> Int16:
    """Decode little-endian PCM16 bytes; an odd byte count raises ValueError."""
    if len(data) % 2:
        raise ValueError("PCM16 audio must have an even number of bytes")
    return np.frombuffer(data, dtype="<i2").astype(np.int16)


def round_to_int16(x: Float32) -> Int16:
    """Round int16-scaled float samples to nearest even and saturate to int16."""
    return np.clip(np.rint(x), -32768, 32767).astype(np.int16)


class InputDecoder:
    """Decode one session's appends to MODEL_RATE int16, keeping resampler state."""

    def __init__(self, fmt: InputFormat, rate: int) -> None:
        assert fmt in INPUT_FORMATS
        assert rate in (INPUT_RATES if fmt == "audio/pcm" else (G711_RATE,))
        self.fmt = fmt
        self.rate = rate
        self._resampler = StreamResampler(rate, MODEL_RATE)

    def _decode_samples(self, payload: bytes) -> Int16:
        """Decode payload bytes to int16 samples at the input rate."""
        if self.fmt == "audio/pcmu":
            return ulaw2lin(payload)
        if self.fmt == "audio/pcma":
            return alaw2lin(payload)
        return decode_pcm16(payload)

    def decode(self, payload: bytes) -> Int16:
        """Return the MODEL_RATE samples that this payload makes available now."""
        samples = self._decode_samples(payload)
        if self._resampler.bypass:
            return samples
        # int16 values are exact in float32, so no scaling is needed around soxr.
        return round_to_int16(self._resampler.process(samples.astype(np.float32)))

    def flush(self) -> Int16:
        """Return the resampler's pending tail and start a fresh stream (AI-4)."""
        return round_to_int16(self._resampler.flush())

    def reset(self) -> None:
        """Drop pending input and start a fresh stream (AI-4, clear)."""
        self._resampler.reset()


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
