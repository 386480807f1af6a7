"""Pure TTS audio output: WAV headers, frame encoding and segment fades (spec §5)."""

from __future__ import annotations

import struct
from itertools import pairwise
from typing import Literal

import numpy as np
import numpy.typing as npt

from gateway.pcm import Float32, StreamResampler, float_to_pcm16, lin2ulaw

SAMPLE_RATES = (8000, 16000, 22050, 24000, 44100, 48000)
FORMATS = ("wav", "pcm", "mulaw")
AudioFormat = Literal["wav", "pcm", "mulaw"]
DEFAULT_FORMAT: AudioFormat = "wav"
DEFAULT_RATE = 16_000  # R1: the reference's sample_rate
MULAW_RATE = 8000  # the only rate of ``mulaw``

MAX_FRAME_MS = 200
FADE_MS = 5.0
_UNKNOWN_SIZE = 0xFFFFFFFF
WAV_HEADER_BYTES = 44


def _wav_header(sample_rate: int, riff_size: int, data_size: int) -> bytes:
    """Pack a 44-byte mono 16-bit PCM WAV header with the given size fields."""
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        riff_size,
        b"WAVE",
        b"fmt ",
        16,
        1,
        1,
        sample_rate,
        sample_rate * 2,
        2,
        16,
        b"data",
        data_size,
    )


def wav_stream_header(sample_rate: int) -> bytes:
    """Return the AU2 streaming WAV header, with both sizes set to 0xFFFFFFFF."""
    return _wav_header(sample_rate, _UNKNOWN_SIZE, _UNKNOWN_SIZE)


def wav_file_header(sample_rate: int, data_bytes: int) -> bytes:
    """Return a WAV header with true sizes, for a complete (REST) response body."""
    return _wav_header(sample_rate, WAV_HEADER_BYTES - 8 + data_bytes, data_bytes)


def encode_samples(pcm16: npt.NDArray[np.int16], fmt: AudioFormat) -> bytes:
    """Encode int16 samples as little-endian PCM16 (wav, pcm) or μ-law bytes."""
    if fmt == "mulaw":
        return lin2ulaw(pcm16)
    return pcm16.astype("<i2").tobytes()


def split_frames(data: bytes, bytes_per_sample: int, max_samples: int) -> list[bytes]:
    """Cut encoded audio into near-equal frames of whole samples, none empty."""
    samples = len(data) // bytes_per_sample
    if samples == 0:
        return []
    count = -(-samples // max_samples)
    bounds = [bytes_per_sample * (samples * i // count) for i in range(count + 1)]
    return [data[a:b] for a, b in pairwise(bounds)]


class FrameEncoder:
    """Turn one request's native float32 audio into output frames (AU3, AU5, AU11)."""

    def __init__(
        self,
        native_rate: int,
        out_rate: int,
        fmt: AudioFormat,
        max_frame_ms: int = MAX_FRAME_MS,
    ) -> None:
        assert out_rate in SAMPLE_RATES and fmt in FORMATS
        self.fmt = fmt
        self.out_rate = out_rate
        self.bytes_per_sample = 1 if fmt == "mulaw" else 2
        self.max_frame_samples = max(1, out_rate * max_frame_ms // 1000)
        self.samples_out = 0
        self._resampler = StreamResampler(native_rate, out_rate)

    def push(self, pcm: npt.ArrayLike) -> list[bytes]:
        """Resample the next engine chunk and return its frames (possibly none)."""
        return self._frames(self._resampler.process(pcm))

    def finish(self) -> list[bytes]:
        """Flush the resampler and return the frames of its tail (AU11)."""
        return self._frames(self._resampler.flush())

    def _frames(self, out: Float32) -> list[bytes]:
        """Convert resampled audio to frames and count its samples."""
        if out.size == 0:
            return []
        self.samples_out += out.size
        data = encode_samples(float_to_pcm16(out), self.fmt)
        return split_frames(data, self.bytes_per_sample, self.max_frame_samples)


def fade_ramp(n: int) -> Float32:
    """Return an n-sample raised-cosine ramp rising from 0 towards 1."""
    return (0.5 - 0.5 * np.cos(np.pi * np.arange(n) / n)).astype(np.float32)


def fade_edges(
    x: npt.ArrayLike,
    rate: int,
    fade_in: bool,
    fade_out: bool,
    ms: float = FADE_MS,
) -> Float32:
    """Return a copy of x with raised-cosine fades at the chosen ends (AU9)."""
    out = np.array(x, dtype=np.float32)
    n = min(round(rate * ms / 1000), out.size)
    if n == 0:
        return out
    ramp = fade_ramp(n)
    if fade_in:
        out[:n] *= ramp
    if fade_out:
        out[-n:] *= ramp[::-1]
    return out
