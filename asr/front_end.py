"""The audio front end of one realtime session: every piece of signal state (§6.2, §6.4, §7).

``FrontEnd`` takes an append's audio bytes (the parse has undone base64 and checked whole
samples, AI-1 steps 1–4) and owns everything the signal goes through from there: the input
format and its decoder with the streaming resampler (AI-3 to AI-6), the Silero stream
(``asr.vad``, VD-1), turn detection (VD-2 to VD-5, server VAD's commits) and the session clock
(AI-10). Each call returns a ``Heard``: the new model-rate PCM, where it lies on the clock and
the turns it completed. ``RealtimeSession`` places a ``Heard`` in items; it keeps no signal
state. The calls that decode or score are blocking (soxr, onnxruntime): the handlers run them
off the loop (AR-2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asr.audio import G711_RATE, INPUT_FORMATS, INPUT_RATES, InputFormat
from asr.config import SessionConfig
from asr.protocol import Dialect
from asr.vad import FRAME, SileroStream
from asr.whisper import MODEL_RATE
from gateway.pcm import Float32, Int16, StreamResampler, alaw2lin, ulaw2lin

START_FRAMES = 3  # VD-4: speech starts after 3 consecutive speech frames (96 ms)
SAMPLES_PER_MS = MODEL_RATE // 1000


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
        self.width = 2 if fmt == "audio/pcm" else 1  # bytes of one input sample
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


Turn = SpeechStart | SpeechStop


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

    def feed(self, probs: Sequence[float]) -> list[Turn]:
        """Advance over ``probs`` (one per frame) and return the turn events."""
        events: list[Turn] = []
        silence_samples = self.params.silence_duration_ms * SAMPLES_PER_MS
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


@dataclass(frozen=True)
class Heard:
    """What one call of the front end made of the audio (an append, a flush, a reformat).

    ``pcm`` is the new model-rate PCM16, ending at clock ``end``; ``input_ms`` the accepted
    input it came from (IT-4). ``turns`` are the turn events it completed; ``decided`` is
    the clock up to which frames were scored (what lies after waits for a whole frame).
    ``trim``, ``server_vad`` and ``pad`` are the front end's mode when it heard this: items
    retain audio only from speech on (AI-7), turns are announced and a stop commits (VD-3),
    the prefix padding in samples.
    """

    pcm: bytes
    end: int
    input_ms: float
    turns: tuple[Turn, ...]
    decided: int
    trim: bool
    server_vad: bool
    pad: int


class FrontEnd:
    """One session's decoder, resampler, VAD stream, turn detector and clock."""

    def __init__(
        self, config: SessionConfig, dialect: Dialect, *, trim: bool = True
    ) -> None:
        self.trim = trim  # ASR_TRIM_NONSPEECH: score every frame to trim non-speech
        self.clock = 0  # AI-10: model-rate samples of all accepted audio, never reset
        self.decoder = InputDecoder(config.format, config.rate)
        self.rate = config.rate  # the input's sample rate
        self.width = self.decoder.width  # bytes of one input sample (PCM16 2, G.711 1)
        self.vad = SileroStream()
        self.server_vad = _server_vad(config, dialect)
        self.detector = TurnDetector(_turn_params(config, dialect))

    @property
    def scoring(self) -> bool:
        """Whether audio is scored by Silero (AI-7, §7): to trim, or for server VAD."""
        return self.trim or self.server_vad

    def append(self, audio: bytes, samples: int) -> Heard:
        """The first ``samples`` input samples of an append (those the quota accepted, MT-3),
        decoded, resampled, scored and turned into turns (AI-1 step 5)."""
        pcm = self.decoder.decode(audio[: samples * self.decoder.width])
        return self._hear(pcm, samples * 1000 / self.decoder.rate)

    def flush(self) -> Heard:
        """The resampler's tail: it belongs to the item being committed (AI-4)."""
        return self._hear(self.decoder.flush(), 0.0)

    def configure(self, config: SessionConfig, dialect: Dialect) -> Heard | None:
        """Take a validated configuration: a format change flushes the resampler into the
        current item first (AI-4), and that tail is returned (None without a change); the
        turn parameters follow (VD-3); scoring that starts now starts on a fresh stream."""
        tail = None
        if (config.format, config.rate) != (self.decoder.fmt, self.decoder.rate):
            tail = self.flush()
            self.decoder = InputDecoder(config.format, config.rate)
            self.rate, self.width = config.rate, self.decoder.width
        scored = self.scoring
        self.server_vad = _server_vad(config, dialect)
        self.detector.params = _turn_params(config, dialect)
        if not self.server_vad and self.detector.in_speech:
            self.detector.idle()
        if self.scoring and not scored:
            self.vad.reset()
            self.detector.reset(self.clock)
        return tail

    def commit(self) -> None:
        """A manual commit ends any turn in progress (VD-6)."""
        self.detector.idle()

    def clear(self) -> int:
        """Drop the pending input, the VAD stream and any turn (IT-14, VD-1); the clock
        still counts the resampler's dropped tail (AI-10). Returns the clock."""
        self.clock += len(self.decoder.flush())
        self.decoder.reset()
        self.vad.reset()
        self.detector.reset(self.clock)
        return self.clock

    def _hear(self, pcm: Int16, input_ms: float) -> Heard:
        probs = self.vad.feed(pcm).tolist() if self.scoring and len(pcm) else []
        return self.hear(pcm, probs, input_ms)

    def hear(self, pcm: Int16, probs: Sequence[float], input_ms: float) -> Heard:
        """Model-rate audio and the probabilities of the frames it completed: the clock
        moves on and, while scoring, the turn detector runs (the pure half of a call)."""
        self.clock += len(pcm)
        turns = self.detector.feed(probs) if self.scoring else []
        pad = self.detector.params.prefix_padding_ms * SAMPLES_PER_MS
        return Heard(
            pcm=pcm.tobytes(),
            end=self.clock,
            input_ms=input_ms,
            turns=tuple(turns),
            decided=self.detector.next_frame,
            trim=self.trim,
            server_vad=self.server_vad,
            pad=pad,
        )


def _server_vad(config: SessionConfig, dialect: Dialect) -> bool:
    """True when server VAD ends turns (VD-3); never in the vLLM dialect."""
    return config.turn_detection is not None and dialect is not Dialect.VLLM


def _turn_params(config: SessionConfig, dialect: Dialect) -> TurnParams:
    td = config.turn_detection
    if td is None or dialect is Dialect.VLLM:
        return TurnParams()
    return TurnParams(td.threshold, td.prefix_padding_ms, td.silence_duration_ms)
