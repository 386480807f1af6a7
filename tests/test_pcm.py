"""Tests of gateway.pcm: G.711 codecs, sample conversion and the stream resampler."""

import warnings

import numpy as np
import pytest
import soxr

from gateway.pcm import (
    StreamResampler,
    alaw2lin,
    float_to_pcm16,
    lin2alaw,
    lin2ulaw,
    pcm16_to_float,
    ulaw2lin,
)

ALL_PCM16 = np.arange(-32768, 32768, dtype=np.int16)
ALL_CODES = bytes(range(256))


@pytest.fixture(scope="module")
def audioop():
    """CPython's audioop (3.11 warns on import), or skip where it is gone."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return pytest.importorskip("audioop")


def test_tts_au8_mulaw_golden_values() -> None:
    pcm = np.array([0, 100, -100, 1000, 32767, -32768], dtype=np.int16)
    assert lin2ulaw(pcm) == bytes([0xFF, 0xF2, 0x72, 0xCE, 0x80, 0x00])


def test_tts_au8_lin2ulaw_bit_exact_with_audioop(audioop) -> None:
    assert lin2ulaw(ALL_PCM16) == audioop.lin2ulaw(ALL_PCM16.tobytes(), 2)


def test_asr_ai5_ulaw2lin_bit_exact_with_audioop(audioop) -> None:
    assert ulaw2lin(ALL_CODES).tobytes() == audioop.ulaw2lin(ALL_CODES, 2)


def test_asr_ai5_alaw2lin_bit_exact_with_audioop(audioop) -> None:
    assert alaw2lin(ALL_CODES).tobytes() == audioop.alaw2lin(ALL_CODES, 2)


def test_lin2alaw_bit_exact_with_audioop(audioop) -> None:
    assert lin2alaw(ALL_PCM16) == audioop.lin2alaw(ALL_PCM16.tobytes(), 2)


def test_asr_ai5_decoders_return_int16_one_sample_per_byte() -> None:
    for decode in (ulaw2lin, alaw2lin):
        out = decode(ALL_CODES)
        assert out.dtype == np.int16 and out.shape == (256,)
        assert decode(b"").shape == (0,)


def test_ulaw_code_round_trip() -> None:
    # 0x7F and 0xFF both decode to 0, which encodes as 0xFF.
    expected = ALL_CODES.replace(b"\x7f", b"\xff")
    assert lin2ulaw(ulaw2lin(ALL_CODES)) == expected


def test_alaw_code_round_trip() -> None:
    assert lin2alaw(alaw2lin(ALL_CODES)) == ALL_CODES


def round_trip_error(encode, decode) -> tuple[np.ndarray, np.ndarray]:
    """Absolute error of encode-then-decode over every int16 value, and |x|."""
    x = ALL_PCM16.astype(np.int32)
    return np.abs(decode(encode(ALL_PCM16)).astype(np.int32) - x), np.abs(x)


def test_ulaw_sample_round_trip_error_is_within_one_step() -> None:
    err, mag = round_trip_error(lin2ulaw, ulaw2lin)
    # G.711 steps grow with the segment: about |x| / 16, and 8 near zero.
    assert np.all(err[mag < 32000] <= 8 + mag[mag < 32000] / 16)
    assert err[mag < 100].max() < 8


def test_alaw_sample_round_trip_error_is_within_one_step() -> None:
    err, mag = round_trip_error(lin2alaw, alaw2lin)
    assert np.all(err[mag < 32000] <= 8 + mag[mag < 32000] / 32)
    assert err[mag < 100].max() <= 8


def test_tts_au8_float_to_pcm16_clips_scales_and_rounds_half_even() -> None:
    x = np.array([-2.0, -1.0, 0.0, 1.0, 3.0, 0.5 / 32767, 1.5 / 32767, -2.5 / 32767])
    assert float_to_pcm16(x).tolist() == [-32767, -32767, 0, 32767, 32767, 0, 2, -2]
    assert float_to_pcm16(x).dtype == np.int16


def test_tts_au8_float_to_pcm16_accepts_float32() -> None:
    x = np.linspace(-1, 1, 1001, dtype=np.float32)
    expected = np.rint(x.astype(np.float64) * 32767).astype(np.int16)
    assert np.array_equal(float_to_pcm16(x), expected)


def test_pcm16_to_float_scale() -> None:
    out = pcm16_to_float(np.array([-32768, 0, 16384, 32767], dtype=np.int16))
    assert out.dtype == np.float32
    assert out.tolist() == [-1.0, 0.0, 0.5, 32767 / 32768]


def test_stream_resampler_bypass_is_identity() -> None:
    r = StreamResampler(16000, 16000)
    x = np.random.default_rng(0).uniform(-1, 1, 500).astype(np.float32)
    assert r.bypass
    assert np.array_equal(r.process(x), x)
    assert r.flush().shape == (0,)


def test_stream_resampler_matches_one_shot_and_restarts_after_flush() -> None:
    x = np.random.default_rng(1).uniform(-0.5, 0.5, 24000).astype(np.float32)
    one_shot = soxr.resample(x, 24000, 16000, quality="HQ")
    r = StreamResampler(24000, 16000)
    for _ in range(2):  # flush() leaves a fresh stream behind
        out = np.concatenate([r.process(x[:7000]), r.process(x[7000:]), r.flush()])
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, one_shot, atol=1e-6)


def test_stream_resampler_reset_drops_pending_input() -> None:
    x = np.random.default_rng(2).uniform(-0.5, 0.5, 4800).astype(np.float32)
    r = StreamResampler(48000, 16000)
    r.process(np.ones(3000, dtype=np.float32))
    r.reset()
    out = np.concatenate([r.process(x), r.flush()])
    np.testing.assert_allclose(
        out, soxr.resample(x, 48000, 16000, quality="HQ"), atol=1e-6
    )
