"""Tests of tts.audio against tts spec §5 (AU1-AU11)."""

import io
import struct
import wave

import numpy as np
import pytest
import soxr

from gateway.pcm import float_to_pcm16, lin2ulaw
from tts.audio import (
    FORMATS,
    SAMPLE_RATES,
    FrameEncoder,
    fade_edges,
    wav_file_header,
    wav_stream_header,
)

NATIVE_RATES = (22050, 24000)


def tone(n: int, rate: int, seed: int = 0, peak: float = 0.7) -> np.ndarray:
    """A deterministic test signal: two tones plus a little noise, float32."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / rate
    x = 0.5 * np.sin(2 * np.pi * 440 * t) + 0.3 * np.sin(2 * np.pi * 3100 * t + 1)
    x += 0.05 * rng.standard_normal(n)
    return (peak * x / np.abs(x).max()).astype(np.float32)


def random_chunks(x: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """Split x at random points, with some empty and one-sample chunks."""
    cuts = np.sort(rng.integers(0, x.size, size=rng.integers(1, 40)))
    cuts = np.concatenate([cuts, cuts[:3], cuts[:2] + 1]).clip(0, x.size)
    return np.split(x, np.sort(cuts))


def encode_all(enc: FrameEncoder, chunks: list[np.ndarray]) -> list[bytes]:
    """Push every chunk, then finish, collecting all frames."""
    frames = [f for c in chunks for f in enc.push(c)]
    return frames + enc.finish()


def as_int16(frames: list[bytes]) -> np.ndarray:
    """Join PCM16 frames into one int16 array."""
    return np.frombuffer(b"".join(frames), dtype="<i2").astype(np.int16)


def test_tts_au2_streaming_wav_header_bytes() -> None:
    expected = bytes.fromhex(
        "52494646"
        "ffffffff"
        "57415645"
        "666d7420"
        "10000000"
        "0100"
        "0100"
        "803e0000"
        "007d0000"
        "0200"
        "1000"
        "64617461"
        "ffffffff"
    )
    assert wav_stream_header(16000) == expected


@pytest.mark.parametrize("rate", SAMPLE_RATES)
def test_tts_au2_streaming_wav_header_fields(rate: int) -> None:
    header = wav_stream_header(rate)
    assert len(header) == 44
    fields = struct.unpack("<4sI4s4sIHHIIHH4sI", header)
    assert fields == (
        b"RIFF", 0xFFFFFFFF, b"WAVE", b"fmt ", 16, 1, 1, rate, rate * 2, 2, 16,
        b"data", 0xFFFFFFFF,
    )  # fmt: skip


def test_tts_au2_stream_with_unknown_sizes_reads_every_frame() -> None:
    pcm = float_to_pcm16(tone(1000, 16000)).astype("<i2").tobytes()
    with wave.open(io.BytesIO(wav_stream_header(16000) + pcm)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
        assert w.readframes(1 << 20) == pcm


@pytest.mark.parametrize("rate", SAMPLE_RATES)
def test_wav_file_header_true_sizes(rate: int) -> None:
    pcm = float_to_pcm16(tone(777, rate)).astype("<i2").tobytes()
    header = wav_file_header(rate, len(pcm))
    assert header[:4] == b"RIFF" and header[36:40] == b"data"
    assert struct.unpack_from("<I", header, 4)[0] == 36 + len(pcm)
    assert struct.unpack_from("<I", header, 40)[0] == len(pcm)
    assert header[8:36] == wav_stream_header(rate)[8:36]
    with wave.open(io.BytesIO(header + pcm)) as w:
        assert (w.getframerate(), w.getnframes()) == (rate, 777)
        assert w.readframes(777) == pcm


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("out_rate", SAMPLE_RATES)
def test_tts_au3_frames_never_empty_or_odd(fmt: str, out_rate: int) -> None:
    rng = np.random.default_rng(out_rate)
    enc = FrameEncoder(24000, out_rate, fmt)
    frames = encode_all(enc, random_chunks(tone(24000, 24000), rng))
    width = 1 if fmt == "mulaw" else 2
    assert frames
    for frame in frames:
        assert len(frame) > 0 and len(frame) % width == 0
        assert len(frame) // width <= out_rate * 200 // 1000
    assert sum(len(f) for f in frames) == enc.samples_out * width


def test_tts_au3_zero_length_resampler_output_is_not_a_frame() -> None:
    enc = FrameEncoder(24000, 16000, "pcm")
    assert enc.push(np.zeros(0, dtype=np.float32)) == []
    # soxr holds back its first output while its filter fills.
    assert enc.push(np.full(3, 0.1, dtype=np.float32)) == []
    assert enc.samples_out == 0


@pytest.mark.parametrize("max_frame_ms", (20, 200))
def test_tts_au3_one_big_chunk_is_split_into_near_equal_frames(
    max_frame_ms: int,
) -> None:
    enc = FrameEncoder(16000, 16000, "pcm", max_frame_ms=max_frame_ms)
    frames = enc.push(tone(16000 + 1, 16000))
    limit = 16 * max_frame_ms
    sizes = [len(f) // 2 for f in frames]
    assert sum(sizes) == 16001 and max(sizes) <= limit
    assert len(frames) == -(-16001 // limit) and max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("native_rate", NATIVE_RATES)
@pytest.mark.parametrize("out_rate", SAMPLE_RATES)
def test_tts_au6_stateful_resampling_matches_one_shot(
    native_rate: int, out_rate: int
) -> None:
    x = tone(2 * native_rate + 123, native_rate, seed=out_rate)
    one_shot = float_to_pcm16(soxr.resample(x, native_rate, out_rate, quality="HQ"))
    expected_len = round(x.size * out_rate / native_rate)
    rng = np.random.default_rng(native_rate + out_rate)
    for _ in range(4):
        enc = FrameEncoder(native_rate, out_rate, "pcm")
        out = as_int16(encode_all(enc, random_chunks(x, rng)))
        assert abs(out.size - expected_len) <= 1
        assert enc.samples_out == out.size
        n = min(out.size, one_shot.size)
        diff = np.abs(out[:n].astype(np.int32) - one_shot[:n])
        assert diff.max() <= 1


def test_tts_au5_bypass_when_rates_match() -> None:
    x = tone(5000, 24000)
    enc = FrameEncoder(24000, 24000, "wav")
    out = as_int16(enc.push(x[:1234]) + enc.push(x[1234:]))
    assert np.array_equal(out, float_to_pcm16(x))
    assert enc.finish() == []


@pytest.mark.parametrize("native_rate", NATIVE_RATES)
def test_tts_au11_finish_flushes_resampler_tail(native_rate: int) -> None:
    x = tone(native_rate, native_rate)
    enc = FrameEncoder(native_rate, 16000, "pcm")
    head = as_int16(enc.push(x))
    tail = as_int16(enc.finish())
    assert tail.size > 0
    assert abs(head.size + tail.size - 16000) <= 1
    assert enc.samples_out == head.size + tail.size


def test_tts_au1_mulaw_frames_are_g711_of_the_pcm() -> None:
    x = tone(24000, 24000)
    pcm = as_int16(encode_all(FrameEncoder(24000, 8000, "pcm"), [x]))
    frames = encode_all(FrameEncoder(24000, 8000, "mulaw"), [x[:999], x[999:]])
    assert all(0 < len(f) <= 1600 for f in frames)
    assert b"".join(frames) == lin2ulaw(pcm)


def test_tts_au8_pcm_frames_are_little_endian_int16() -> None:
    enc = FrameEncoder(16000, 16000, "pcm")
    # 0.5 * 32767 = 16383.5 rounds to the even 16384.
    frame = enc.push(np.array([1.0, -1.0, 0.5, -0.5], dtype=np.float32))[0]
    assert frame == struct.pack("<4h", 32767, -32767, 16384, -16384)


def segments_joined(rate: int, pause_ms: int, seed: int) -> tuple[np.ndarray, float]:
    """Join faded 440 Hz segments with random phases; return output and inner step."""
    rng = np.random.default_rng(seed)
    pause = np.zeros(rate * pause_ms // 1000, dtype=np.float32)
    parts: list[np.ndarray] = []
    inner = 0.0
    count = 5
    for i in range(count):
        n = int(rng.integers(rate // 10, rate // 2))
        phase = rng.uniform(0, 2 * np.pi)
        seg = (0.5 * np.sin(2 * np.pi * 440 * np.arange(n) / rate + phase)).astype(
            np.float32
        )
        inner = max(inner, float(np.abs(np.diff(seg)).max()))
        parts.append(fade_edges(seg, rate, fade_in=i > 0, fade_out=i < count - 1))
        if i < count - 1:
            parts.append(pause)
    return np.concatenate(parts), inner


@pytest.mark.parametrize("rate", (8000, 16000, 22050, 24000, 48000))
@pytest.mark.parametrize("pause_ms", (0, 80))
def test_tts_au9_faded_joins_have_no_clicks(rate: int, pause_ms: int) -> None:
    for seed in range(5):
        out, inner = segments_joined(rate, pause_ms, seed)
        assert np.abs(np.diff(out)).max() <= 1.1 * inner


def test_tts_au9_unfaded_joins_do_click() -> None:
    rng = np.random.default_rng(3)
    t = np.arange(800) / 16000
    a = 0.5 * np.sin(2 * np.pi * 440 * t + 0.3)
    b = 0.5 * np.sin(2 * np.pi * 440 * t + rng.uniform(2, 4))
    inner = np.abs(np.diff(a)).max()
    assert np.abs(np.diff(np.concatenate([a, b]))).max() > 1.1 * inner


def test_tts_au9_fade_edges_shape() -> None:
    x = np.ones(1000, dtype=np.float32)
    out = fade_edges(x, 16000, fade_in=True, fade_out=True)
    assert out.dtype == np.float32 and np.array_equal(x, np.ones(1000))
    assert out[0] == 0.0 and out[-1] == 0.0
    assert np.all(np.diff(out[:80]) > 0) and np.all(np.diff(out[-80:]) < 0)
    assert np.all(out[80:-80] == 1.0)
    only_in = fade_edges(x, 16000, fade_in=True, fade_out=False)
    assert only_in[0] == 0.0 and np.all(only_in[80:] == 1.0)
    assert fade_edges(x[:10], 16000, True, True).shape == (10,)
    assert fade_edges(x[:0], 16000, True, True).shape == (0,)


@pytest.mark.parametrize("native_rate", NATIVE_RATES)
@pytest.mark.parametrize("out_rate", (8000, 16000, 48000))
def test_tts_au9_joins_stay_smooth_through_the_frame_encoder(
    native_rate: int, out_rate: int
) -> None:
    # The stream's own first and last 10 ms are not joins: soxr rings there.
    edge = out_rate // 100
    tone_step = 0.5 * 2 * np.sin(np.pi * 440 / out_rate)
    for seed in range(3):
        joined, _ = segments_joined(native_rate, 0, seed)
        enc = FrameEncoder(native_rate, out_rate, "pcm")
        out = as_int16(encode_all(enc, np.array_split(joined, 37))) / 32767
        assert np.abs(np.diff(out[edge:-edge])).max() <= 1.1 * tone_step
