"""A deterministic TTS engine for fast tests: a tone of 10 ms per character.

Its word marks are exact: a word lasts the tone of its characters.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import numpy as np

from tts.worker.engines.base import Pcm, TtsEngineRequest, WordMark
from tts.worker.engines.word_marks import speakable_words

MS_PER_CHAR = 10
CHUNK_MS = 100


def sine_pcm(*, ms: int, rate: int, freq: float = 440.0, amplitude: float = 0.5) -> Pcm:
    """Return ``ms`` milliseconds of a sine tone at ``rate``."""
    t = np.arange(rate * ms // 1000, dtype=np.float64) / rate
    return (amplitude * np.sin(2 * np.pi * freq * t)).astype(np.float32)


class FakeTts:
    """Emits a 440 Hz tone whose length is proportional to the text, in 100 ms chunks."""

    name = "fake"
    model_version = "fake/tone"
    native_rate = 22_050
    voices: tuple[str, ...] = ("tone",)
    default_voice = "tone"
    supports_speed = True

    def __init__(self, chunk_delay_s: float = 0.0) -> None:
        self.chunk_delay_s = chunk_delay_s

    async def stream(self, req: TtsEngineRequest) -> AsyncGenerator[Pcm, None]:
        """Yield the tone for ``req.text`` chunk by chunk."""
        pcm = sine_pcm(
            ms=int(MS_PER_CHAR * len(req.text) / req.speed), rate=self.native_rate
        )
        if req.word_timestamps:
            per_char = self.native_rate * MS_PER_CHAR / 1000 / req.speed
            req.words.extend(
                WordMark(w.text, round(w.start * per_char), round(w.end * per_char))
                for w in speakable_words(req.text)
            )
        step = self.native_rate * CHUNK_MS // 1000
        for start in range(0, len(pcm), step):
            await asyncio.sleep(self.chunk_delay_s)
            yield pcm[start : start + step]

    def close(self) -> None:
        """Nothing to release."""
