"""Streaming Silero VAD and turn detection for the gateway (realtime §7).

``SileroStream`` runs the Silero model shipped in the faster-whisper wheel on 512-sample frames
with the previous 64 samples as context, carrying the LSTM state between calls, so its per-frame
probabilities equal ``faster_whisper.vad.get_vad_model()(audio)`` on the concatenated audio (VD-1).
It is loaded with onnxruntime directly so that the gateway does not import CTranslate2.
``TurnDetector`` is pure: frame probabilities in, speech start/stop positions out (VD-2 to VD-5).
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from asr.audio import InputDecoder, InputFormat
from gateway.pcm import Float32, Int16

if TYPE_CHECKING:
    import onnxruntime

FRAME = 512  # samples per VAD frame at 16 kHz (32 ms)
CONTEXT = 64  # samples of the previous frame fed with each frame
START_FRAMES = 3  # VD-4: speech starts after 3 consecutive speech frames (96 ms)
STATE_SHAPE = (1, 1, 128)
# Silero's LSTM state drifts during long non-speech: after 300 s of silence the first words of
# an utterance score below 0.5 for up to 2 s. So after this many frames (30 s) without a
# frame >= QUIET_BELOW, the state is reset (context kept). Deviation from VD-1's "resets on
# clear only"; it never applies to audio that has speech at least every 30 s.
QUIET_RESET_FRAMES = 30 * 16000 // 512
QUIET_BELOW = 0.5


def silero_path() -> Path:
    """The Silero model inside the installed faster-whisper wheel."""
    spec = importlib.util.find_spec("faster_whisper")
    assert spec is not None and spec.submodule_search_locations
    return Path(spec.submodule_search_locations[0]) / "assets" / "silero_vad_v6.onnx"


@functools.cache
def silero_session() -> onnxruntime.InferenceSession:
    """One ONNX session per process, configured as faster-whisper's SileroVADModel."""
    import onnxruntime

    opts = onnxruntime.SessionOptions()
    opts.inter_op_num_threads = 1
    opts.intra_op_num_threads = 1
    opts.enable_cpu_mem_arena = False
    opts.log_severity_level = 4
    return onnxruntime.InferenceSession(
        str(silero_path()), providers=["CPUExecutionProvider"], sess_options=opts
    )


class SileroStream:
    """Per-frame speech probabilities of one 16 kHz stream (blocking; run off the loop)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget the stream: state, context and any partial frame (VD-1: on clear)."""
        self._h = np.zeros(STATE_SHAPE, dtype=np.float32)
        self._c = np.zeros(STATE_SHAPE, dtype=np.float32)
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)
        self._quiet = 0  # frames since the last one scored >= QUIET_BELOW

    @property
    def pending(self) -> int:
        """Samples waiting for a whole frame."""
        return len(self._pending)

    def feed(self, pcm: Int16) -> Float32:
        """Score every frame completed by ``pcm``; returns one probability per frame."""
        audio = np.concatenate([self._pending, pcm.astype(np.float32) / 32768.0])
        whole = len(audio) // FRAME * FRAME
        self._pending = audio[whole:]
        if not whole:
            return np.zeros(0, dtype=np.float32)
        frames = audio[:whole].reshape(-1, FRAME)
        contexts = np.concatenate([self._context[None], frames[:-1, -CONTEXT:]])
        batch = np.concatenate([contexts, frames], axis=1)
        out, self._h, self._c = silero_session().run(
            None, {"input": batch, "h": self._h, "c": self._c}
        )
        self._context = frames[-1, -CONTEXT:].copy()
        probs = np.asarray(out, dtype=np.float32).reshape(-1)
        self._forget_long_silence(probs)
        return probs

    def _forget_long_silence(self, probs: Float32) -> None:
        loud = np.nonzero(probs >= QUIET_BELOW)[0]
        self._quiet = (
            len(probs) - 1 - int(loud[-1]) if len(loud) else self._quiet + len(probs)
        )
        if self._quiet >= QUIET_RESET_FRAMES:
            self._h = np.zeros(STATE_SHAPE, dtype=np.float32)
            self._c = np.zeros(STATE_SHAPE, dtype=np.float32)
            self._quiet = 0


@dataclass(frozen=True)
class TurnParams:
    """Threshold and timings of turn detection (server VAD's, or the trimming defaults)."""

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500

    @property
    def negative_threshold(self) -> float:
        """VD-2 hysteresis: in speech, a frame is silence only below this."""
        return max(self.threshold - 0.15, 0.01)


@dataclass(frozen=True)
class SpeechStart:
    """Speech began at sample ``at`` (start of the first frame of the run)."""

    at: int


@dataclass(frozen=True)
class SpeechStop:
    """Silence lasted ``silence_duration_ms``; the turn ends at sample ``at``."""

    at: int


class TurnDetector:
    """VD-2 to VD-5 over frame probabilities; positions are session-clock samples."""

    def __init__(self, params: TurnParams, origin: int = 0) -> None:
        self.params = params
        self.next_frame = origin  # clock position of the next frame's first sample
        self.in_speech = False
        self._run = 0
        self._silence_from: int | None = None

    def reset(self, origin: int) -> None:
        """Back to idle; frames now start at ``origin`` (clear, or manual commit VD-6)."""
        self.next_frame = origin
        self.idle()

    def idle(self) -> None:
        """Forget a turn in progress without moving the frame grid."""
        self.in_speech = False
        self._run = 0
        self._silence_from = None

    def feed(self, probs: Sequence[float]) -> list[SpeechStart | SpeechStop]:
        """Advance over ``probs`` (one per frame) and return the turn events."""
        events: list[SpeechStart | SpeechStop] = []
        silence_samples = self.params.silence_duration_ms * 16
        for p in probs:
            start = self.next_frame
            self.next_frame += FRAME
            if not self.in_speech:
                self._run = self._run + 1 if p >= self.params.threshold else 0
                if self._run >= START_FRAMES:
                    self.in_speech = True
                    self._silence_from = None
                    events.append(SpeechStart(at=start - (START_FRAMES - 1) * FRAME))
                continue
            if p >= self.params.threshold:
                self._silence_from = None
            elif p < self.params.negative_threshold and self._silence_from is None:
                self._silence_from = start
            if (
                self._silence_from is not None
                and self.next_frame - self._silence_from >= silence_samples
            ):
                events.append(SpeechStop(at=self.next_frame))
                self.idle()
        return events


class AudioFrontEnd:
    """One session's decoder, resampler and VAD stream (blocking; run via ``to_thread``, AR-2)."""

    def __init__(self, fmt: InputFormat, rate: int) -> None:
        self.decoder = InputDecoder(fmt, rate)
        self.vad = SileroStream()

    def process(self, payload: bytes, *, vad: bool) -> tuple[bytes, list[float]]:
        """Decode an append to model-rate PCM16 bytes and the probabilities it completes."""
        return self._scored(self.decoder.decode(payload), vad)

    def flush(self, *, vad: bool) -> tuple[bytes, list[float]]:
        """The resampler's tail (manual commit, format change: AI-4)."""
        return self._scored(self.decoder.flush(), vad)

    def reformat(
        self, fmt: InputFormat, rate: int, *, vad: bool
    ) -> tuple[bytes, list[float]]:
        """Flush into the current item, then decode the new format (AI-4)."""
        tail = self.flush(vad=vad)
        self.decoder = InputDecoder(fmt, rate)
        return tail

    def reset(self) -> None:
        """Drop pending input and the VAD state (clear)."""
        self.decoder.reset()
        self.vad.reset()

    def _scored(self, pcm: Int16, vad: bool) -> tuple[bytes, list[float]]:
        probs = self.vad.feed(pcm).tolist() if vad and len(pcm) else []
        return pcm.tobytes(), probs
