"""Pure PCM helpers for tts and asr: G.711, int16 <-> float, stream resampling."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import soxr

Int16 = npt.NDArray[np.int16]
Float32 = npt.NDArray[np.float32]

PCM16_MAX = 32767
# pcm16_to_float divides by 2**15 so that -32768 maps to exactly -1.0 (Whisper's scale).
PCM16_SCALE = 32768.0

# ITU-T G.711 constants, named as in CPython's Modules/audioop.c.
_ULAW_BIAS = 0x84
_ULAW_CLIP = 8159
_ULAW_SEG_END = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF])
_ALAW_SEG_END = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF])
_QUANT_MASK = 0x0F
_SEG_MASK = 0x70
_SEG_SHIFT = 4
_SIGN_BIT = 0x80


def float_to_pcm16(x: npt.ArrayLike) -> Int16:
    """Clip float samples to [-1, 1], scale by 32767 and round half to even."""
    scaled = np.clip(np.asarray(x, dtype=np.float64), -1.0, 1.0) * PCM16_MAX
    return np.rint(scaled).astype(np.int16)


def pcm16_to_float(x: npt.ArrayLike) -> Float32:
    """Convert int16 samples to float32 in [-1, 1) by dividing by 32768."""
    return np.asarray(x, dtype=np.float32) / np.float32(PCM16_SCALE)


def _encode_ulaw14(val: npt.NDArray[np.int32]) -> npt.NDArray[np.uint8]:
    """Encode 14-bit linear samples as audioop's st_14linear2ulaw does."""
    mask = np.where(val < 0, 0x7F, 0xFF)
    mag = np.minimum(np.abs(val), _ULAW_CLIP) + (_ULAW_BIAS >> 2)
    seg = np.searchsorted(_ULAW_SEG_END, mag, side="left")
    code = (seg << 4) | ((mag >> (seg + 1)) & _QUANT_MASK)
    code = np.where(seg >= 8, 0x7F, code)
    return (code ^ mask).astype(np.uint8)


def _encode_alaw13(val: npt.NDArray[np.int32]) -> npt.NDArray[np.uint8]:
    """Encode 13-bit linear samples as audioop's st_linear2alaw does."""
    mask = np.where(val >= 0, 0xD5, 0x55)
    mag = np.where(val >= 0, val, -val - 1)
    seg = np.searchsorted(_ALAW_SEG_END, mag, side="left")
    quant = np.where(seg < 2, mag >> 1, mag >> np.maximum(seg, 1)) & _QUANT_MASK
    code = np.where(seg >= 8, 0x7F, (seg << _SEG_SHIFT) | quant)
    return (code ^ mask).astype(np.uint8)


def _decode_ulaw(code: npt.NDArray[np.int32]) -> Int16:
    """Decode μ-law codes as audioop's st_ulaw2linear16 does."""
    u = ~code & 0xFF
    t = (((u & _QUANT_MASK) << 3) + _ULAW_BIAS) << ((u & _SEG_MASK) >> _SEG_SHIFT)
    return np.where(u & _SIGN_BIT, _ULAW_BIAS - t, t - _ULAW_BIAS).astype(np.int16)


def _decode_alaw(code: npt.NDArray[np.int32]) -> Int16:
    """Decode A-law codes as audioop's st_alaw2linear16 does."""
    a = code ^ 0x55
    seg = (a & _SEG_MASK) >> _SEG_SHIFT
    t = (a & _QUANT_MASK) << 4
    t = np.where(seg == 0, t + 8, (t + 0x108) << np.maximum(seg - 1, 0))
    return np.where(a & _SIGN_BIT, t, -t).astype(np.int16)


_ALL_PCM16 = np.arange(-32768, 32768, dtype=np.int32)
_ALL_CODES = np.arange(256, dtype=np.int32)
# Lookup tables built once: encoders are indexed by pcm16 + 32768, decoders by code.
_LIN2ULAW = _encode_ulaw14(_ALL_PCM16 >> 2)
_LIN2ALAW = _encode_alaw13(_ALL_PCM16 >> 3)
_ULAW2LIN = _decode_ulaw(_ALL_CODES)
_ALAW2LIN = _decode_alaw(_ALL_CODES)


def _table_index(pcm16: npt.ArrayLike) -> npt.NDArray[np.int32]:
    """Map int16 samples to indexes into a 65536-entry encoder table."""
    return np.asarray(pcm16, dtype=np.int16).astype(np.int32) + 32768


def lin2ulaw(pcm16: npt.ArrayLike) -> bytes:
    """Encode int16 samples as G.711 μ-law, bit-exact with audioop.lin2ulaw."""
    return _LIN2ULAW[_table_index(pcm16)].tobytes()


def lin2alaw(pcm16: npt.ArrayLike) -> bytes:
    """Encode int16 samples as G.711 A-law, bit-exact with audioop.lin2alaw."""
    return _LIN2ALAW[_table_index(pcm16)].tobytes()


def ulaw2lin(data: bytes) -> Int16:
    """Decode G.711 μ-law bytes to int16, bit-exact with audioop.ulaw2lin."""
    return _ULAW2LIN[np.frombuffer(data, dtype=np.uint8)]


def alaw2lin(data: bytes) -> Int16:
    """Decode G.711 A-law bytes to int16, bit-exact with audioop.alaw2lin."""
    return _ALAW2LIN[np.frombuffer(data, dtype=np.uint8)]


class StreamResampler:
    """Stateful mono float32 resampler (soxr HQ); the identity when the rates match."""

    def __init__(self, in_rate: int, out_rate: int) -> None:
        self.in_rate = in_rate
        self.out_rate = out_rate
        self._stream: soxr.ResampleStream | None = None
        self.reset()

    @property
    def bypass(self) -> bool:
        """Whether input passes through unchanged because the rates are equal."""
        return self.in_rate == self.out_rate

    def reset(self) -> None:
        """Drop any buffered input and start a fresh stream."""
        self._stream = (
            None
            if self.bypass
            else soxr.ResampleStream(
                self.in_rate, self.out_rate, 1, dtype="float32", quality="HQ"
            )
        )

    def process(self, x: npt.ArrayLike) -> Float32:
        """Resample the next chunk; the result may be short, or empty."""
        chunk = np.ascontiguousarray(x, dtype=np.float32)
        if self._stream is None:
            return chunk
        return self._stream.resample_chunk(chunk, last=False)

    def flush(self) -> Float32:
        """Return the buffered tail (last=True), then start a fresh stream."""
        if self._stream is None:
            return np.zeros(0, dtype=np.float32)
        tail = self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
        self.reset()
        return tail
