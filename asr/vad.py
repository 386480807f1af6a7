"""Streaming Silero VAD for the gateway (realtime §7.1): speech probabilities per frame.

``SileroStream`` runs the Silero model shipped in the faster-whisper wheel on 512-sample frames
with the previous 64 samples as context, carrying the LSTM state between calls, so its per-frame
probabilities equal ``faster_whisper.vad.get_vad_model()(audio)`` on the concatenated audio (VD-1).
It is loaded with onnxruntime directly so that the gateway does not import CTranslate2. Turn
detection over these probabilities is the front end's (``asr.front_end``).
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gateway.pcm import Float32, Int16

if TYPE_CHECKING:
    import onnxruntime

FRAME = 512  # samples per VAD frame at 16 kHz (32 ms)
CONTEXT = 64  # samples of the previous frame fed with each frame
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
