"""The token log probabilities of faster-whisper decodes, from CTranslate2 itself.

faster-whisper keeps only a window's summed score; CTranslate2's ``Whisper.generate`` returns
every step's logits over the vocabulary when asked (``return_logits_vocab``). ``LogitsTap``
stands in for the model's CTranslate2 object and asks for them on the decodes that want
them, on the thread that runs the decode; the log softmax of each sampled token is recorded
per ``generate`` call (one call per 30 s window at temperature 0), and
``generated_tokens`` finds each returned segment's tokens in those calls.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from asr.worker.engines.base import Token
from asr.worker.engines.tokens import Detokenize, text_tokens


@dataclass(frozen=True)
class Call:
    """One ``generate`` call: its output ids (timestamps included) and their log
    probabilities."""

    ids: list[int]
    logprobs: list[float] = field(repr=False)


def sampled_logprobs(ids: Sequence[int], steps: Sequence[Any]) -> list[float]:
    """The log softmax of each sampled id under its step's logits."""
    out = []
    for index, token in enumerate(ids):
        logits = np.asarray(steps[index], dtype=np.float64)
        top = float(logits.max())
        total = float(np.log(np.exp(logits - top).sum()))
        out.append(min(0.0, float(logits[token]) - top - total))
    return out


class LogitsTap:
    """A CTranslate2 Whisper model whose ``generate`` records token log probabilities
    inside ``capture()``; every other attribute is the model's."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self._local = threading.local()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def generate(self, features: Any, prompts: Any, **kwargs: Any) -> Any:
        """``Whisper.generate``, with the logits when this thread captures."""
        calls: list[Call] | None = getattr(self._local, "calls", None)
        if calls is None:
            return self._model.generate(features, prompts, **kwargs)
        results = self._model.generate(
            features, prompts, return_logits_vocab=True, **kwargs
        )
        for result in results:
            ids = list(result.sequences_ids[0])
            calls.append(Call(ids, sampled_logprobs(ids, result.logits[0])))
        return results

    @contextmanager
    def capture(self) -> Iterator[list[Call]]:
        """Record the calls made on this thread until the block ends."""
        calls: list[Call] = []
        self._local.calls = calls
        try:
            yield calls
        finally:
            self._local.calls = None


def _find(ids: list[int], wanted: list[int], start: int) -> int | None:
    """Where ``wanted`` occurs contiguously in ``ids`` from ``start``, or None."""
    for at in range(start, len(ids) - len(wanted) + 1):
        if ids[at : at + len(wanted)] == wanted:
            return at
    return None


def generated_tokens(
    segments: Sequence[Sequence[int]],
    calls: list[Call],
    *,
    eot: int,
    skip: int,
    detokenize: Detokenize,
) -> tuple[Token, ...]:
    """The text tokens of ``segments`` (each a segment's ids, in order) with their log
    probabilities, the first ``skip`` (a forced prefix) left out; () when a segment's
    tokens are not found in the recorded calls."""
    tokens: list[Token] = []
    call, position = 0, 0
    for segment in segments:
        wanted = [t for t in segment if t < eot]
        while call < len(calls):
            at = _find(calls[call].ids, wanted, position)
            if at is not None:
                break
            call, position = call + 1, 0
        else:
            return ()
        logprobs = calls[call].logprobs[at : at + len(wanted)]
        position = at + len(wanted)
        drop = min(skip, len(wanted))
        skip -= drop
        tokens += text_tokens(wanted[drop:], logprobs[drop:], detokenize)
    return tuple(tokens)
