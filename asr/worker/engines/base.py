"""The ASR engine interface: 16 kHz float32 PCM in, one hypothesis out per decode."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from asr.whisper import MODEL_RATE, DecodedSegment

Pcm = npt.NDArray[np.float32]
# New tokens a decode may emit: far above speech's 3-5 a second (and 250 for a 30 s window,
# above the 224 Whisper was trained to emit per window). A decode that loops on one syllable
# runs on to Whisper's 448 tokens otherwise (~0.8 s on 2 vCPU), on noise or after a wrong
# forced prefix ("A L O W L L L …" for "Hello world", issue 13).
NEW_TOKENS_PER_S = 8
NEW_TOKENS_MIN = 10


def new_token_limit(samples: int, prompt_tokens: int, max_length: int) -> int:
    """New tokens a decode of ``samples`` may emit after ``prompt_tokens`` of decoder prompt,
    within the model's ``max_length`` (at least one)."""
    bound = NEW_TOKENS_MIN + NEW_TOKENS_PER_S * samples // MODEL_RATE
    return max(1, min(bound, max_length - prompt_tokens))


@dataclass(frozen=True)
class Word:
    """A decoded piece of text, with its times in seconds from the start of the decoded audio.

    ``end`` is None when the engine knows no time for it: Whisper on vLLM times segments, not
    words, so only a segment's last word has an end, and the streaming window never moves to
    the inside of a segment.
    """

    text: str = field(repr=False)
    start: float | None = None
    end: float | None = None
    probability: float = 1.0


@dataclass(frozen=True)
class Token:
    """A generated text token: its text and the engine's log probability of it (≤ 0)."""

    text: str = field(repr=False)
    logprob: float = 0.0


@dataclass(frozen=True)
class AsrDecodeRequest:
    """One decode of a window of audio, optionally forcing a known prefix."""

    audio: Pcm = field(repr=False)
    prompt: str = field(default="", repr=False)
    prefix: str = field(default="", repr=False)
    language: str | None = "en"
    word_timestamps: bool = False
    # The client asked for log probabilities (realtime IT-10): the hypothesis carries its
    # generated tokens with their log probabilities.
    logprobs: bool = False
    # Whisper's segments with times and confidence (``verbose_json``): a timestamped decode.
    segments: bool = False
    # A chunk decode: it may run slower, and must not slow a final decode down.
    background: bool = False
    # A chunk decode may encode this many seconds of context instead of Whisper's 30 (the
    # audio and 2 s of padding, at least this much; issue 13); None: the full 30 s. An engine
    # without the notion ignores it. Finals are never shortened.
    context_s: float | None = None


def final_request(
    audio: Pcm,
    *,
    prompt: str = "",
    prefix: str = "",
    language: str | None = "en",
    words: bool = False,
    logprobs: bool = False,
    segments: bool = False,
) -> AsrDecodeRequest:
    """The product's final decode of ``audio``: the full 30 s encoder context, greedy,
    at final priority (bench/asr.py decodes whole items with it, side by side)."""
    return AsrDecodeRequest(
        audio=audio,
        prompt=prompt,
        prefix=prefix,
        language=language,
        word_timestamps=words,
        logprobs=logprobs,
        segments=segments,
    )


@dataclass(frozen=True)
class AsrHypothesis:
    """The engine's transcript of the whole window, forced prefix included."""

    text: str = field(repr=False)
    words: tuple[Word, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # With ``logprobs``: the generated text tokens in order; their texts join to the text
    # after the forced prefix (a forced prefix has none: it was not generated).
    tokens: tuple[Token, ...] = ()
    # With ``segments``: Whisper's segments of the decode.
    segments: tuple[DecodedSegment, ...] = ()
    # False: decoded with less than Whisper's 30 s of encoder context (a quick chunk decode,
    # issue 13); such a hypothesis never stands in for a final decode.
    full_context: bool = True
    # The language the decode ran in (ISO-639-1): the request's, or the one the engine
    # detected when the request named none; None when the engine does not say.
    language: str | None = None


class AsrEngine(Protocol):
    """A loaded ASR backend; one instance per worker process serves every slot."""

    name: str
    model_version: str
    # Decodes of each class (final, chunk) the worker lets run at once (realtime WK-6).
    decode_slots: int

    async def decode(self, req: AsrDecodeRequest) -> AsrHypothesis:
        """Transcribe ``req.audio``; a cancelled caller is released within 200 ms."""
        ...

    def close(self) -> None:
        """Release threads and native sessions."""
        ...
