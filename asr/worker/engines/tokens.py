"""Whisper output tokens as text and confidence, for both engines (realtime IT-10, REST
``verbose_json``): pure functions over token ids, log probabilities and a detokenizer.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence

from asr.worker.engines.base import Token

Detokenize = Callable[[list[int]], str]
INCOMPLETE = "\ufffd"  # a byte-level token that ends inside a UTF-8 character


def text_tokens(
    ids: Sequence[int], logprobs: Sequence[float], detokenize: Detokenize
) -> list[Token]:
    """``ids`` (text tokens only) as tokens whose texts join to ``detokenize(ids)``.

    Each text is what the token adds to the decoded text (incremental detokenization), so a
    character split over byte-level tokens belongs to the token that completes it, which
    also carries the log probabilities of the ones before it (their product is the
    character's probability).
    """
    tokens: list[Token] = []
    done, pending = "", 0.0
    for index in range(len(ids)):
        pending += logprobs[index] if index < len(logprobs) else 0.0
        text = detokenize(list(ids[: index + 1]))
        if text.endswith(INCOMPLETE) or not text.startswith(done):
            continue
        tokens.append(Token(text=text[len(done) :], logprob=min(0.0, pending)))
        done, pending = text, 0.0
    return [t for t in tokens if t.text]


def average_logprob(logprobs: Sequence[float]) -> float:
    """Whisper's ``avg_logprob`` of a window: the sum over its sampled tokens (the end of
    text included) divided by their count plus one (openai/whisper ``decoding.py``)."""
    return sum(logprobs) / (len(logprobs) + 1)


def compression_ratio(text: str) -> float:
    """Whisper's ``compression_ratio``: the text's bytes over their zlib-compressed size."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0
