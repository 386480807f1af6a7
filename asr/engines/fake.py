"""A deterministic ASR engine for fast tests: one known word per second of audio."""

from __future__ import annotations

import asyncio

from asr.engines.base import MODEL_RATE, AsrDecodeRequest, AsrHypothesis, Word

FAKE_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")


def fake_transcript(seconds: int) -> str:
    """Return the transcript the fake engine gives for ``seconds`` of audio."""
    return " ".join(FAKE_WORDS[i % len(FAKE_WORDS)] for i in range(seconds))


class FakeAsr:
    """Transcribes N whole seconds of audio as the first N words of ``FAKE_WORDS``."""

    name = "fake"
    model_version = "fake/words"

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s

    async def decode(self, req: AsrDecodeRequest) -> AsrHypothesis:
        """Return the known transcript for the length of ``req.audio``."""
        await asyncio.sleep(self.delay_s)
        seconds = len(req.audio) // MODEL_RATE
        words = tuple(
            Word(
                text=" " + FAKE_WORDS[i % len(FAKE_WORDS)], start=float(i), end=i + 1.0
            )
            for i in range(seconds)
        )
        return AsrHypothesis(text="".join(w.text for w in words).strip(), words=words)

    def close(self) -> None:
        """Nothing to release."""
