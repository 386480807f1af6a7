"""One request's audio path in the worker: fades, pauses, resampling, framing (spec §5).

Pure and synchronous, so it is tested without an event loop. The fader holds back only the fade
length (5 ms, AU9 allows 10) so audio leaves as soon as the engine yields it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gateway.pcm import Float32
from tts.audio import FADE_MS, AudioFormat, FrameEncoder, fade_ramp

_EMPTY = np.zeros(0, dtype=np.float32)


class SegmentFader:
    """Raised-cosine fade-in at a segment's start and fade-out at its end (AU9)."""

    def __init__(self, rate: int, ms: float = FADE_MS) -> None:
        self.n = max(1, round(rate * ms / 1000))
        self._ramp = fade_ramp(self.n)
        self._seen = 0  # samples of the current segment pushed so far
        self._held: Float32 = _EMPTY

    def start(self) -> None:
        """Begin a new segment: its first samples are faded in."""
        self._seen = 0
        self._held = _EMPTY

    def push(self, pcm: npt.ArrayLike) -> Float32:
        """Return the audio that can leave now, keeping the last ``n`` samples back."""
        new = np.array(pcm, dtype=np.float32)
        if self._seen < self.n and new.size:
            k = min(self.n - self._seen, new.size)
            new[:k] *= self._ramp[self._seen : self._seen + k]
        self._seen += new.size
        joined = np.concatenate([self._held, new]) if self._held.size else new
        if joined.size <= self.n:
            self._held = joined
            return _EMPTY
        self._held = joined[-self.n :]
        return joined[: -self.n]

    def end(self) -> Float32:
        """Return the held tail, faded out to zero."""
        tail, self._held = self._held, _EMPTY
        if tail.size:
            tail = tail * self._ramp[::-1][-tail.size :]
        return tail


class AudioPipeline:
    """Native float32 segments in, final-format frames out, for one request."""

    def __init__(
        self,
        *,
        native_rate: int,
        out_rate: int,
        fmt: AudioFormat,
        max_frame_ms: int,
        pause_ms: int,
    ) -> None:
        self._args = (native_rate, out_rate, fmt, max_frame_ms)
        self._encoder = FrameEncoder(*self._args)
        self._fader = SegmentFader(native_rate)
        self._pause = np.zeros(round(native_rate * pause_ms / 1000), dtype=np.float32)
        self._samples_before = 0  # output samples of encoders dropped by reset()
        # Native samples pushed since the last reset, pauses included: where the next
        # pushed sample lands in the output, at the native rate (soxr keeps time).
        self.native_in = 0

    @property
    def samples_out(self) -> int:
        """Output samples produced so far."""
        return self._samples_before + self._encoder.samples_out

    def begin_segment(self) -> None:
        """The next pushes belong to a new segment."""
        self._fader.start()

    def push(self, pcm: npt.ArrayLike) -> list[bytes]:
        """Frames for the next engine chunk (possibly none)."""
        samples = np.asarray(pcm, dtype=np.float32)
        self.native_in += samples.size
        return self._encode(self._fader.push(samples))

    def end_segment(self, *, pause: bool) -> list[bytes]:
        """Frames of the segment's faded tail, plus the inter-segment pause if asked."""
        tail = self._fader.end()
        if pause and self._pause.size:
            tail = np.concatenate([tail, self._pause])
            self.native_in += self._pause.size
        return self._encode(tail)

    def flush(self) -> list[bytes]:
        """Frames of the resampler's tail (AU11); the next audio starts a fresh stream."""
        return self._encoder.finish()

    def reset(self) -> None:
        """Drop everything buffered (clear, C2): a fresh resampler, the next audio fades in."""
        self._samples_before = self.samples_out
        self._encoder = FrameEncoder(*self._args)
        self._fader.start()
        self.native_in = 0

    def _encode(self, pcm: Float32) -> list[bytes]:
        return self._encoder.push(pcm) if pcm.size else []
