"""Confirmed-word streaming (realtime SA-4/SA-5): pure functions, no I/O.

A chunk decode gives a hypothesis for the whole item so far. A piece (a word with its leading
whitespace) is confirmed when two successive hypotheses agree on it at the same position and it
is not among the last ``unfixed_words`` pieces. Confirmed text is never retracted; what is left
is the unconfirmed tail.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_PIECE = re.compile(r"\s*\S+")


def pieces(text: str) -> list[str]:
    """Split ``text`` into pieces that keep their leading whitespace."""
    return _PIECE.findall(text)


def _norm(piece: str) -> str:
    folded = piece.strip().casefold()
    return "".join(c for c in folded if not unicodedata.category(c).startswith("P"))


@dataclass(frozen=True)
class TranscriptUpdate:
    """What one decode adds: newly confirmed text and the current unconfirmed tail."""

    confirmed: str
    unconfirmed: str


def confirm(
    *, emitted: str, hypothesis: str, previous: str, unfixed_words: int
) -> TranscriptUpdate:
    """Return the text of ``hypothesis`` beyond ``emitted`` that ``previous`` agrees on."""
    done = pieces(emitted)
    hyp, prev = pieces(hypothesis), pieces(previous)
    if [_norm(p) for p in hyp[: len(done)]] != [_norm(p) for p in done]:
        return TranscriptUpdate(confirmed="", unconfirmed="")
    candidates = hyp[len(done) : max(len(done), len(hyp) - unfixed_words)]
    agreed: list[str] = []
    for offset, piece in enumerate(candidates):
        index = len(done) + offset
        if index >= len(prev) or _norm(prev[index]) != _norm(piece):
            break
        agreed.append(piece)
    text = "".join(agreed)
    if not emitted:
        text = text.lstrip()
    tail = "".join(hyp[len(done) + len(agreed) :])
    return TranscriptUpdate(confirmed=text, unconfirmed=tail)


def remainder(*, emitted: str, final: str) -> str:
    """The part of the final hypothesis after what was already emitted (realtime SA-7)."""
    done, hyp = pieces(emitted), pieces(final)
    rest = "".join(hyp[len(done) :])
    return rest.lstrip() if not emitted else rest
