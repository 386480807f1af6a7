"""Silero streaming VAD, turn detection and the audio front end (§6.2, §7)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from faster_whisper.vad import get_vad_model

from asr.config import SessionConfig
from asr.front_end import FrontEnd, SpeechStart, SpeechStop, TurnDetector, TurnParams
from asr.protocol import Dialect
from asr.vad import FRAME, SileroStream
from tests.asr.conftest import Clip


def sixty_seconds(clips: dict[str, Clip]) -> np.ndarray:
    rng = np.random.default_rng(1)
    parts = []
    while sum(map(len, parts)) < 60 * 16000:
        parts.append(clips["clip"].pcm16k)
        parts.append((rng.standard_normal(8000) * 300).astype(np.int16))
        parts.append(np.zeros(12000, dtype=np.int16))
    audio = np.concatenate(parts)[: 60 * 16000]
    return audio[: len(audio) // FRAME * FRAME]


def test_asr_vd1_streaming_probabilities_match_the_reference(
    clips: dict[str, Clip],
) -> None:
    audio = sixty_seconds(clips)
    # SileroVADModel.__call__ zeroes the last 64 samples of its input in place (a view
    # is written), so the reference gets one extra frame of silence that is then ignored.
    padded = np.concatenate([audio, np.zeros(FRAME, dtype=np.int16)])
    reference = get_vad_model()(padded.astype(np.float32) / 32768.0)[:-1]
    stream, got, rng = SileroStream(), [], np.random.default_rng(2)
    i = 0
    while i < len(audio):
        n = int(rng.integers(1, 5000))
        got.append(stream.feed(audio[i : i + n]))
        i += n
    probs = np.concatenate(got)
    assert len(probs) == len(reference)
    assert np.max(np.abs(probs - reference)) <= 1e-3
    assert probs.max() > 0.9 and probs.min() < 0.1  # speech and silence both present


def test_asr_vd1_reset_starts_a_fresh_stream(clips: dict[str, Clip]) -> None:
    audio = clips["clip"].pcm16k[: 20 * FRAME]
    stream = SileroStream()
    first = stream.feed(audio)
    stream.feed(audio[:100])
    stream.reset()
    assert stream.pending == 0
    assert np.array_equal(stream.feed(audio), first)


def front_end(rate: int, *, trim: bool = True) -> FrontEnd:
    config = SessionConfig(model="m", format="audio/pcm", rate=rate)
    return FrontEnd(config, Dialect.OPENAI, trim=trim)


def detector(**params: int | float) -> TurnDetector:
    return TurnDetector(TurnParams(**params))  # type: ignore[arg-type]


def test_asr_vd4_speech_starts_at_the_first_frame_of_three() -> None:
    d = detector()
    assert d.feed([0.1, 0.9, 0.9]) == []
    assert d.feed([0.2, 0.6, 0.7, 0.8]) == [SpeechStart(at=4 * FRAME)]
    assert d.in_speech


def test_asr_vd2_vd5_hysteresis_and_silence_duration() -> None:
    d = detector(threshold=0.5, silence_duration_ms=96)
    d.feed([0.9, 0.9, 0.9])
    # 0.4 is between the thresholds (0.35..0.5): not silence while in speech.
    assert d.feed([0.4] * 10) == []
    # Silence (< 0.35) for 3 frames = 96 ms: stop at the end of the third.
    events = d.feed([0.3, 0.3, 0.4, 0.3])
    assert events == [SpeechStop(at=(13 + 3) * FRAME)]
    assert not d.in_speech


def test_asr_vd5_speech_resets_the_silence_count() -> None:
    d = detector(silence_duration_ms=96)
    d.feed([0.9, 0.9, 0.9, 0.1, 0.1, 0.9, 0.1, 0.1])
    assert d.in_speech
    assert d.feed([0.1]) == [SpeechStop(at=9 * FRAME)]


@pytest.mark.parametrize("rate", [24000, 48000])
def test_asr_t_b4_10ms_appends_equal_one_append(rate: int) -> None:
    t = np.arange(3 * rate) / rate
    pcm = (0.4 * np.sin(2 * np.pi * 440 * t) * 32767).astype("<i2").tobytes()
    whole = front_end(rate, trim=False)
    one = whole.append(pcm, len(pcm) // 2).pcm + whole.flush().pcm
    pieces = front_end(rate, trim=False)
    step = 2 * rate // 100
    parts = [
        pieces.append(pcm[i : i + step], len(pcm[i : i + step]) // 2).pcm
        for i in range(0, len(pcm), step)
    ]
    many = b"".join([*parts, pieces.flush().pcm])
    a, b = np.frombuffer(one, "<i2"), np.frombuffer(many, "<i2")
    assert abs(len(a) - 3 * 16000) <= 1 and abs(len(b) - len(a)) <= 1
    n = min(len(a), len(b))
    assert np.max(np.abs(a[:n].astype(int) - b[:n].astype(int))) <= 1


def test_asr_t_b5_one_second_of_48k_in_50_ms() -> None:
    front = front_end(48000)
    front.append(bytes(960 * 2), 960)  # warm the ONNX session
    pcm = (
        (np.random.default_rng(0).standard_normal(48000) * 3000).astype("<i2").tobytes()
    )
    started = time.perf_counter()
    heard = front.append(pcm, 48000)
    assert time.perf_counter() - started <= 0.05
    assert heard.decided >= 30 * FRAME and len(heard.pcm) > 2 * 15000
