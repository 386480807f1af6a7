"""The session's audio front end with real speech: decode, resample, VAD, turns, clock (§6, §7)."""

from __future__ import annotations

import numpy as np
import pytest

from asr.config import SessionConfig, TurnDetection
from asr.front_end import FrontEnd, Heard, SpeechStart, SpeechStop
from asr.protocol import Dialect
from asr.vad import FRAME, SileroStream
from tests.asr.conftest import Clip, silence

SERVER_VAD = TurnDetection()


def front_end(
    rate: int = 24000,
    *,
    fmt: str = "audio/pcm",
    turns: TurnDetection | None = None,
    dialect: Dialect = Dialect.OPENAI,
    trim: bool = True,
) -> FrontEnd:
    config = SessionConfig(model="m", format=fmt, rate=rate, turn_detection=turns)  # type: ignore[arg-type]
    return FrontEnd(config, dialect, trim=trim)


def appends(front: FrontEnd, audio: bytes, ms: int = 20) -> list[Heard]:
    """``audio`` (one byte a sample for G.711, two for PCM16) in appends of ``ms``."""
    step = front.width * front.rate * ms // 1000
    return [
        front.append(audio[i : i + step], len(audio[i : i + step]) // front.width)
        for i in range(0, len(audio), step)
    ]


def turns_of(heards: list[Heard]) -> list[SpeechStart | SpeechStop]:
    return [turn for heard in heards for turn in heard.turns]


def test_speech_then_silence_starts_and_stops_one_server_vad_turn(
    clips: dict[str, Clip],
) -> None:
    clip = clips["clip"]
    front = front_end(turns=SERVER_VAD)
    heards = appends(front, silence(1.0) + clip.bytes_at(24000) + silence(1.5))
    turns = turns_of(heards)
    assert [type(t) for t in turns] == [SpeechStart, SpeechStop]
    start, stop = turns[0].at, turns[1].at
    # Piper's clip starts with a little silence of its own: speech starts just after 1 s.
    assert 16000 <= start <= 16000 + 8000
    # VD-5: the stop comes silence_duration_ms after the last speech frame, in the tail.
    speech_end = 16000 + len(clip.pcm16k)
    assert speech_end - 8000 <= stop <= speech_end + 500 * 16 + 2 * FRAME
    assert all(h.server_vad and h.pad == 300 * 16 for h in heards)
    assert not front.detector.in_speech


def test_the_clock_counts_every_model_rate_sample_and_flush_completes_it(
    clips: dict[str, Clip],
) -> None:
    audio = clips["clip"].bytes_at(48000)
    front = front_end(48000)
    heards = appends(front, audio, ms=10)
    tail = front.flush()
    made = sum(len(h.pcm) for h in [*heards, tail]) // 2
    assert front.clock == made == tail.end
    assert abs(made - round(len(audio) // 2 * 16000 / 48000)) <= 1  # AI-4
    assert [h.end for h in heards] == sorted(h.end for h in heards)
    assert sum(h.input_ms for h in heards) == pytest.approx(len(audio) / 2 / 48)


def test_probabilities_equal_one_silero_stream_over_the_model_rate_audio(
    clips: dict[str, Clip],
) -> None:
    """The front end's VAD sees exactly the audio it hands on (VD-1): its turns are those
    of a detector fed by a Silero stream over the concatenated PCM."""
    front = front_end(turns=SERVER_VAD)
    heards = appends(front, clips["clip"].bytes_at(24000) + silence(1.0), ms=30)
    pcm = np.frombuffer(b"".join(h.pcm for h in heards), dtype="<i2")
    reference = front_end(turns=SERVER_VAD)
    probs = SileroStream().feed(pcm.astype(np.int16)).tolist()
    assert turns_of(heards) == list(reference.hear(pcm, probs, 0.0).turns)
    assert heards[-1].decided == len(pcm) // FRAME * FRAME


def test_g711_is_decoded_at_8_khz_one_byte_a_sample(clips: dict[str, Clip]) -> None:
    clip = clips["clip"]
    front = front_end(8000, fmt="audio/pcmu", turns=SERVER_VAD)
    heards = appends(front, clip.g711("audio/pcmu") + bytes([0xFF]) * 12000)
    assert front.width == 1
    pcm = np.frombuffer(b"".join(h.pcm for h in [*heards, front.flush()]), "<i2")
    assert abs(len(pcm) - 2 * (len(clip.pcm16k) // 2 + 12000)) <= 2
    assert [type(t) for t in turns_of(heards)] == [SpeechStart, SpeechStop]


def test_a_quota_cut_append_decodes_only_the_accepted_samples() -> None:
    front = front_end(16000)
    heard = front.append(silence(0.1, rate=16000), 800)
    assert len(heard.pcm) == 2 * 800 and heard.input_ms == 50.0


def test_without_trimming_or_server_vad_nothing_is_scored(
    clips: dict[str, Clip],
) -> None:
    front = front_end(trim=False)
    heards = appends(front, clips["clip"].bytes_at(24000))
    assert turns_of(heards) == [] and heards[-1].decided == 0
    assert not heards[-1].trim and not heards[-1].server_vad


def test_vllm_never_has_server_vad_but_still_trims(clips: dict[str, Clip]) -> None:
    front = front_end(16000, turns=SERVER_VAD, dialect=Dialect.VLLM)
    heards = appends(front, clips["clip"].bytes_at(16000) + silence(1.0, rate=16000))
    assert not front.server_vad and front.scoring
    assert front.detector.params.threshold == 0.5
    assert any(isinstance(t, SpeechStart) for t in turns_of(heards))


def test_a_format_change_flushes_the_old_resampler_first(
    clips: dict[str, Clip],
) -> None:
    front = front_end(48000)
    appends(front, clips["clip"].bytes_at(48000)[:9600])
    same = SessionConfig(model="m", format="audio/pcm", rate=48000)
    assert front.configure(same, Dialect.OPENAI) is None
    before = front.clock
    tail = front.configure(
        SessionConfig(model="m", format="audio/pcm", rate=16000), Dialect.OPENAI
    )
    assert tail is not None and tail.pcm and tail.end == front.clock > before
    heard = front.append(silence(0.02, rate=16000), 320)
    assert len(heard.pcm) == 2 * 320  # 16 kHz passes through (AI-3)


def test_turning_server_vad_on_starts_scoring_fresh_at_the_clock(
    clips: dict[str, Clip],
) -> None:
    front = front_end(trim=False)
    appends(front, silence(0.5))
    on = SessionConfig(model="m", turn_detection=SERVER_VAD)
    assert front.configure(on, Dialect.OPENAI) is None
    assert front.scoring and front.detector.next_frame == front.clock
    heards = appends(front, clips["clip"].bytes_at(24000) + silence(1.5))
    starts = [t for t in turns_of(heards) if isinstance(t, SpeechStart)]
    assert len(starts) == 1 and starts[0].at >= 8000


def test_clear_counts_the_dropped_tail_and_restarts_the_vad(
    clips: dict[str, Clip],
) -> None:
    audio = clips["clip"].bytes_at(24000)
    front = front_end(turns=SERVER_VAD)
    heards = appends(front, audio[: 2 * 24000])
    assert front.detector.in_speech
    pending = front.decoder.flush()  # what clear drops, measured on a twin below
    twin = front_end(turns=SERVER_VAD)
    appends(twin, audio[: 2 * 24000])
    clock = twin.clear()
    assert clock == heards[-1].end + len(pending)
    assert not twin.detector.in_speech and twin.detector.next_frame == clock
    again = appends(twin, audio)
    fresh = appends(front_end(turns=SERVER_VAD), audio)
    assert [h.pcm for h in again] == [h.pcm for h in fresh]  # a fresh stream
    assert [
        type(t)(t.at - clock) for t in turns_of(again) if isinstance(t, SpeechStart)
    ] == [t for t in turns_of(fresh) if isinstance(t, SpeechStart)]
