"""Tests of the front end's decoder against realtime-asr spec §6 (AI-3 to AI-5)."""

from itertools import pairwise

import numpy as np
import pytest
import soxr

from asr.audio import INPUT_RATES
from asr.front_end import InputDecoder, decode_pcm16, round_to_int16
from asr.whisper import MODEL_RATE
from gateway.pcm import alaw2lin, lin2alaw, lin2ulaw, ulaw2lin


def speech_like(n: int, rate: int, seed: int = 0) -> np.ndarray:
    """Deterministic int16 test audio: tones plus noise at about -6 dBFS."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / rate
    x = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.15 * np.sin(2 * np.pi * 1900 * t)
    x += 0.05 * rng.standard_normal(n)
    return np.rint(np.clip(x, -1, 1) * 32767).astype(np.int16)


def random_payloads(data: bytes, width: int, rng: np.random.Generator) -> list[bytes]:
    """Split encoded audio at random whole-sample points, with some empty pieces."""
    n = len(data) // width
    cuts = np.sort(rng.integers(0, n, size=rng.integers(1, 30)))
    bounds = [0, *cuts.tolist(), *cuts[:2].tolist(), n]
    bounds.sort()
    return [data[a * width : b * width] for a, b in pairwise(bounds)]


def decode_all(dec: InputDecoder, payloads: list[bytes]) -> np.ndarray:
    """Decode every payload, then flush, and join the int16 output."""
    parts = [dec.decode(p) for p in payloads] + [dec.flush()]
    for part in parts:
        assert part.dtype == np.int16
    return np.concatenate(parts)


def one_shot(x: np.ndarray, rate: int) -> np.ndarray:
    """Resample the whole int16 signal at once, as the reference."""
    return round_to_int16(soxr.resample(x.astype(np.float32), rate, MODEL_RATE, "HQ"))


def assert_matches_one_shot(out: np.ndarray, x: np.ndarray, rate: int) -> None:
    """Check AI-4 length and ±1 LSB agreement with a one-shot resample."""
    assert abs(out.size - round(x.size * MODEL_RATE / rate)) <= 1
    ref = one_shot(x, rate)
    n = min(out.size, ref.size)
    assert np.abs(out[:n].astype(np.int32) - ref[:n]).max() <= 1


def test_asr_input_rates_and_model_rate() -> None:
    assert INPUT_RATES == (16000, 24000, 48000)
    assert MODEL_RATE == 16000


def test_asr_ai1_decode_pcm16_little_endian() -> None:
    out = decode_pcm16(bytes([0x01, 0x00, 0xFF, 0xFF, 0x00, 0x80, 0xFF, 0x7F]))
    assert out.dtype == np.int16 and out.tolist() == [1, -1, -32768, 32767]
    assert out.flags.writeable
    assert decode_pcm16(b"").shape == (0,)


def test_asr_ai1_decode_pcm16_odd_length_raises() -> None:
    with pytest.raises(ValueError):
        decode_pcm16(b"\x00\x01\x02")


def test_asr_ai3_16k_passes_through_unchanged() -> None:
    x = speech_like(4000, 16000)
    dec = InputDecoder("audio/pcm", 16000)
    data = x.tobytes()
    out = np.concatenate([dec.decode(data[:1000]), dec.decode(data[1000:])])
    assert np.array_equal(out, x)
    assert dec.flush().shape == (0,)


@pytest.mark.parametrize("rate", (24000, 48000))
def test_asr_ai3_stateful_resampling_matches_one_shot(rate: int) -> None:
    x = speech_like(2 * rate + 77, rate, seed=rate)
    rng = np.random.default_rng(rate)
    for _ in range(4):
        dec = InputDecoder("audio/pcm", rate)
        out = decode_all(dec, random_payloads(x.astype("<i2").tobytes(), 2, rng))
        assert_matches_one_shot(out, x, rate)


@pytest.mark.parametrize("rate", (24000, 48000))
def test_asr_ai4_flush_ends_one_item_and_starts_a_fresh_stream(rate: int) -> None:
    a, b = speech_like(rate // 2, rate, 1), speech_like(rate // 3, rate, 2)
    dec = InputDecoder("audio/pcm", rate)
    for x in (a, b):
        head = dec.decode(x.tobytes())
        tail = dec.flush()
        assert tail.size > 0
        assert_matches_one_shot(np.concatenate([head, tail]), x, rate)


def test_asr_ai4_reset_drops_pending_input() -> None:
    x = speech_like(4800, 48000)
    dec = InputDecoder("audio/pcm", 48000)
    dec.decode(speech_like(3000, 48000, seed=9).tobytes())
    dec.reset()
    assert_matches_one_shot(decode_all(dec, [x.tobytes()]), x, 48000)


@pytest.mark.parametrize(
    ("fmt", "encode", "decode"),
    [("audio/pcmu", lin2ulaw, ulaw2lin), ("audio/pcma", lin2alaw, alaw2lin)],
)
def test_asr_ai5_g711_decoded_and_resampled_to_16k(fmt, encode, decode) -> None:
    data = encode(speech_like(8000 + 13, 8000))
    rng = np.random.default_rng(5)
    out = decode_all(InputDecoder(fmt, 8000), random_payloads(data, 1, rng))
    assert_matches_one_shot(out, decode(data), 8000)


def test_asr_ai5_g711_output_tracks_the_input_signal() -> None:
    x = speech_like(8000, 8000)
    out = decode_all(InputDecoder("audio/pcmu", 8000), [lin2ulaw(x)])
    # Every other 16 kHz sample lands on an 8 kHz instant; compare away from the ends.
    err = np.abs(out[::2][100:-100].astype(np.int32) - x[100:-100]).max()
    assert err < 0.05 * 32767


def test_loud_end_is_the_end_of_the_last_frame_above_the_threshold() -> None:
    from asr.audio import loud_end

    pcm = np.zeros(16000, dtype=np.int16)
    pcm[1000:5000] = 2000  # -24 dBFS
    assert loud_end(pcm, 100, -50.0) == 100 + 5120  # 16 frames of 320 samples
    assert loud_end(pcm, 0, -20.0) is None  # quieter than -20 dBFS
    assert loud_end(np.zeros(100, dtype=np.int16), 0, -50.0) is None
    assert loud_end(np.zeros(0, dtype=np.int16), 0, -50.0) is None
