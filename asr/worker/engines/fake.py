"""A deterministic ASR engine for fast tests: one known word per second of audio."""

from __future__ import annotations

import asyncio
import math
from collections import deque

from django.conf import settings

from asr.whisper import MODEL_RATE, DecodedSegment
from asr.worker.engines.base import AsrDecodeRequest, AsrHypothesis, Token, Word

FAKE_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")
FAKE_PROBABILITY = 0.9
FAKE_LOGPROB = math.log(FAKE_PROBABILITY)
FAKE_NO_SPEECH = 0.05
CALLS_KEPT = 256  # the latest decode requests, for tests


def fake_transcript(seconds: int, first: int = 0) -> str:
    """Return the transcript the fake engine gives for ``seconds`` of audio."""
    return " ".join(
        FAKE_WORDS[i % len(FAKE_WORDS)] for i in range(first, first + seconds)
    )


class FakeAsr:
    """Transcribes N whole seconds of audio as the first N words of ``FAKE_WORDS``.

    ``failures`` makes the next decodes raise (fault injection); ``calls`` records the latest
    ``CALLS_KEPT`` requests, so tests can check prompts and prefixes (realtime T-C8).
    """

    name = "fake"
    model_version = "fake/words.en"

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.decode_slots = settings.ENGINE_THREADS
        self.failures = 0
        self.failure_text = "fake engine failure"
        # The language it "detects" when a request names none (its words are English);
        # None: it says nothing, as an engine (or a worker) from before the field.
        self.detected: str | None = "en"
        # Bounded: a long run (bench/soak.py) would otherwise keep every decode's audio.
        self.calls: deque[AsrDecodeRequest] = deque(maxlen=CALLS_KEPT)

    async def decode(self, req: AsrDecodeRequest) -> AsrHypothesis:
        """Return the known transcript for the length of ``req.audio``."""
        self.calls.append(req)
        await asyncio.sleep(self.delay_s)
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError(self.failure_text)
        seconds = len(req.audio) // MODEL_RATE
        words = tuple(
            Word(
                text=" " + FAKE_WORDS[i % len(FAKE_WORDS)],
                start=float(i),
                end=i + 1.0,
                probability=FAKE_PROBABILITY,
            )
            for i in range(seconds)
        )
        text = "".join(w.text for w in words).strip()
        forced = len(
            req.prefix.split()
        )  # one token a word; the prefix was not generated
        tokens = tuple(Token(w.text, FAKE_LOGPROB) for w in words[forced:])
        segment = DecodedSegment(
            start=0.0,
            end=float(seconds),
            text=" " + text,
            avg_logprob=FAKE_LOGPROB,
            no_speech_prob=FAKE_NO_SPEECH,
        )
        return AsrHypothesis(
            text=text,
            words=words if req.word_timestamps else (),
            prompt_tokens=2 + forced,
            completion_tokens=seconds,
            tokens=tokens if req.logprobs else (),
            segments=(segment,) if req.segments and text else (),
            language=req.language or self.detected,
        )

    def close(self) -> None:
        """Nothing to release."""
