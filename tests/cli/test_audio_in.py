"""The input file: its duration still answers after its last block closed the container."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np

from veena_cli.audio_in import AudioSource


class Closed:
    def __getattr__(self, name: str) -> None:
        raise AssertionError(f"{name} read after the container closed")


def test_duration_answers_after_the_last_block(tmp_path: Path) -> None:
    path = tmp_path / "in.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(22050)
        w.writeframes(np.zeros(22050 * 2, dtype="<i2").tobytes())
    source = AudioSource(path, 16000)
    before = source.seconds
    samples = sum(len(block) for block in source.blocks())  # closes the container
    assert before is not None and abs(before - 2.0) < 0.01
    # A closed container's stream reads freed memory, and its duration asserts it is open
    # (CI: "Container is not open" from the progress line): nothing may touch them now.
    source._container = source._stream = Closed()  # type: ignore[assignment]
    assert source.seconds == before
    assert abs(samples - 32000) <= 64
