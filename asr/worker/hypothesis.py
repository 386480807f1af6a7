"""A decode's hypothesis as the data the gateway sends on: its pieces (realtime SA-4), the
logprob entries of a stretch of its text (IT-10), its timed words and Whisper segments.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any

from asr.whisper import MODEL_RATE
from asr.worker.engines.base import AsrHypothesis, Token

_PIECE = re.compile(r"\s*\S+")

LogProb = dict[str, object]  # {"token", "logprob", "bytes"} (realtime IT-10)


def pieces(text: str) -> list[str]:
    """Split ``text`` into pieces that keep their leading whitespace (SA-4)."""
    return _PIECE.findall(text)


def logprob_entry(token: str, logprob: float) -> LogProb:
    """One logprob entry covering ``token`` exactly (IT-10)."""
    return {
        "token": token,
        "logprob": min(0.0, logprob),
        "bytes": list(token.encode("utf-8")),
    }


def _token_spans(hyp: AsrHypothesis) -> list[tuple[int, Token]] | None:
    """Each token of ``hyp`` with the offset in ``hyp.text`` of its first visible
    character; None when the tokens do not spell the end of the text."""
    joined = "".join(t.text for t in hyp.tokens)
    tail = joined.lstrip()
    if not tail or not hyp.text.endswith(tail):
        return None
    at = len(hyp.text) - len(joined)  # where the tokens start (maybe before 0)
    spans = []
    for token in hyp.tokens:
        visible = len(token.text) - len(token.text.lstrip())
        spans.append((at + visible, token))
        at += len(token.text)
    return spans


def token_entries(hyp: AsrHypothesis, begin: int, end: int, text: str) -> list[LogProb]:
    """The entries of the tokens of ``hyp.text[begin:end]``, emitted as ``text`` (the same
    words, its leading whitespace maybe changed), covering ``text`` exactly (IT-10).

    Tokens the text does not split at give one entry per piece, with the summed log
    probability of its tokens; with no tokens at all (the engine gave none) there is none.
    """
    spans = _token_spans(hyp)
    if spans is None:
        return []
    chosen = [t for at, t in spans if begin <= at < end]
    if not chosen:
        return []
    texts = [t.text for t in chosen]
    texts[0] = text[: len(text) - len(text.lstrip())] + texts[0].lstrip()
    if "".join(texts) == text:
        return [logprob_entry(x, t.logprob) for x, t in zip(texts, chosen, strict=True)]
    spans_of_pieces = [
        (m.start(), m.end())
        for m in _PIECE.finditer(hyp.text)
        if begin <= m.start() and m.end() <= end
    ]
    out = pieces(text)
    if len(out) != len(spans_of_pieces):
        return []
    return [
        logprob_entry(piece, sum(t.logprob for at, t in spans if a <= at < b))
        for piece, (a, b) in zip(out, spans_of_pieces, strict=True)
    ]


def timed_words(
    hyp: AsrHypothesis, start: int, end: int
) -> list[dict[str, Any]] | None:
    """The words of a decode of the item's samples ``[start, end)`` in item seconds, within
    that audio; None unless every word has both times."""
    offset, limit = start / MODEL_RATE, end / MODEL_RATE
    words = []
    for word in hyp.words:
        if word.start is None or word.end is None:
            return None
        begin = min(offset + word.start, limit)
        words.append(
            {
                "word": word.text.strip(),
                "start": round(begin, 3),
                "end": round(min(max(offset + word.end, begin), limit), 3),
            }
        )
    return words


def timed_segments(hyp: AsrHypothesis, start: int) -> list[dict[str, Any]]:
    """The Whisper segments of a decode of the item's samples from ``start``
    (``DecodedSegment`` fields, msgpack-ready), times in item seconds (``verbose_json``)."""
    offset = start / MODEL_RATE
    return [
        {
            **asdict(s),
            "start": round(offset + s.start, 3),
            "end": round(offset + s.end, 3),
            "tokens": list(s.tokens),
        }
        for s in hyp.segments
    ]
