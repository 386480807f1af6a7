"""The worker's per-request audio path (docs/specs/tts-ws.md AU3, AU5, AU6, AU9, AU11)."""

from __future__ import annotations

import numpy as np
import pytest
import soxr

from tts.worker.pipeline import AudioPipeline, SegmentFader

NATIVE = 22050


def tone(ms: int, rng: np.random.Generator, rate: int = NATIVE) -> np.ndarray:
    """A 440 Hz segment at amplitude 0.5 with random phase at both ends (AU9's test)."""
    n = rate * ms // 1000
    phase = rng.uniform(0, 2 * np.pi)
    t = np.arange(n) / rate
    return (0.5 * np.sin(2 * np.pi * 440 * t + phase)).astype(np.float32)


def chunked(x: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    cuts = np.sort(rng.integers(0, x.size, size=rng.integers(1, 12)))
    return np.split(x, cuts)


def run(
    segments: list[np.ndarray],
    rng: np.random.Generator,
    *,
    out_rate: int = NATIVE,
    fmt: str = "pcm",
    pause_ms: int = 0,
) -> list[bytes]:
    pipe = AudioPipeline(
        native_rate=NATIVE,
        out_rate=out_rate,
        fmt=fmt,
        max_frame_ms=200,
        pause_ms=pause_ms,
    )
    frames: list[bytes] = []
    for i, segment in enumerate(segments):
        pipe.begin_segment()
        for chunk in chunked(segment, rng):
            frames += pipe.push(chunk)
        frames += pipe.end_segment(pause=i < len(segments) - 1)
    frames += pipe.flush()
    assert pipe.samples_out * (1 if fmt == "mulaw" else 2) == sum(map(len, frames))
    return frames


def pcm(frames: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(frames), dtype="<i2").astype(np.float64) / 32767


@pytest.mark.parametrize("pause_ms", [0, 80])
def test_tts_au9_joins_are_no_steeper_than_the_audio_inside_segments(
    pause_ms: int,
) -> None:
    rng = np.random.default_rng(1)
    segments = [tone(int(rng.integers(150, 400)), rng) for _ in range(6)]
    inside = max(np.abs(np.diff(s)).max() for s in segments)
    out = pcm(run(segments, rng, pause_ms=pause_ms))
    assert np.abs(np.diff(out)).max() <= 1.1 * inside
    expected = sum(s.size for s in segments) + 5 * round(NATIVE * pause_ms / 1000)
    assert out.size == expected


def test_tts_au9_fader_holds_back_at_most_the_fade_and_ramps_both_ends() -> None:
    fader = SegmentFader(NATIVE)
    assert fader.n == round(NATIVE * 0.005) and fader.n <= NATIVE // 100
    fader.start()
    out = fader.push(np.ones(1000, dtype=np.float32))
    assert out.size == 1000 - fader.n and out[0] == 0.0 and out[fader.n] == 1.0
    tail = fader.end()
    assert tail.size == fader.n and tail[0] > 0.99 and tail[-1] < 0.01
    fader.start()
    assert fader.push(np.ones(10, dtype=np.float32)).size == 0  # all held
    assert fader.end().size == 10


@pytest.mark.parametrize("out_rate", [8000, 16000, 24000, 48000])
def test_tts_au5_au6_any_chunking_gives_the_same_output(out_rate: int) -> None:
    rng = np.random.default_rng(out_rate)
    segment = tone(900, rng)
    a = pcm(run([segment], np.random.default_rng(1), out_rate=out_rate))
    b = pcm(run([segment], np.random.default_rng(2), out_rate=out_rate))
    assert a.size == b.size
    assert np.abs(a - b).max() <= 1.5 / 32767
    assert abs(a.size - round(segment.size * out_rate / NATIVE)) <= 1
    # And it is the one-shot resample of the faded segment (AU6).
    faded = run([segment], np.random.default_rng(3), out_rate=NATIVE)
    one_shot = soxr.resample(pcm(faded), NATIVE, out_rate, quality="HQ")
    assert np.abs(one_shot[: a.size] - a[: one_shot.size]).max() <= 2.5 / 32767


@pytest.mark.parametrize("fmt", ["wav", "pcm", "mulaw"])
def test_tts_au3_frames_are_whole_non_empty_and_at_most_200_ms(fmt: str) -> None:
    rng = np.random.default_rng(5)
    frames = run(
        [tone(700, rng), tone(50, rng), tone(1200, rng)], rng, out_rate=8000, fmt=fmt
    )
    width = 1 if fmt == "mulaw" else 2
    assert frames and all(f and len(f) % width == 0 for f in frames)
    assert max(len(f) // width for f in frames) <= 8000 // 5


def test_tts_au11_flush_emits_the_resampler_tail() -> None:
    pipe = AudioPipeline(
        native_rate=NATIVE, out_rate=16000, fmt="pcm", max_frame_ms=200, pause_ms=0
    )
    pipe.begin_segment()
    body = pipe.push(tone(500, np.random.default_rng(0))) + pipe.end_segment(
        pause=False
    )
    tail = pipe.flush()
    assert tail and pipe.samples_out == sum(map(len, body + tail)) // 2
    assert abs(pipe.samples_out - 8000) <= 1


def test_tts_c2_reset_restarts_the_resampler_and_fades_in() -> None:
    pipe = AudioPipeline(
        native_rate=NATIVE, out_rate=NATIVE, fmt="pcm", max_frame_ms=200, pause_ms=0
    )
    pipe.begin_segment()
    pipe.push(np.full(2000, 0.5, dtype=np.float32))
    before = pipe.samples_out
    pipe.reset()
    out = pcm(pipe.push(np.full(2000, 0.5, dtype=np.float32)))
    assert out[0] == 0.0 and pipe.samples_out == before + out.size
