"""The words of a segment, and the documented estimate of their times (issue 35).

A segment's words are its whitespace-separated pieces that hold a letter or a digit, with
the punctuation around them taken off (``"world."`` → ``world``); they are the words of the
text the engine speaks, so after normalisation (``$5`` → ``five dollars``). Piper times them
from its own phoneme durations (``tts.worker.engines.piper_words``); an engine without alignment
(vLLM's SNAC models) uses ``estimate_marks``: each word lasts ``MS_PER_UNIT`` per letter or
digit plus ``GAP_UNITS`` units, from the segment's first sample on, at the request's speed.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from tts.worker.engines.base import WordMark

_PIECE = re.compile(r"\S+")
# A speaking rate of ~15 characters a second with a short gap per word, in the range of
# Orpheus-style voices: an estimate, not a measurement.
MS_PER_UNIT = 62.0
GAP_UNITS = 1.5


@dataclass(frozen=True)
class SpokenWord:
    """A spoken word of a segment and its offsets in the segment's text."""

    text: str
    start: int
    end: int


def _speakable(char: str) -> bool:
    return unicodedata.category(char)[0] in "LN"


def speakable_words(text: str) -> list[SpokenWord]:
    """The segment's words, in order, without the punctuation around them."""
    words = []
    for piece in _PIECE.finditer(text):
        chars = piece[0]
        first = next((i for i, c in enumerate(chars) if _speakable(c)), None)
        if first is None:
            continue
        last = max(i for i, c in enumerate(chars) if _speakable(c))
        start = piece.start() + first
        words.append(
            SpokenWord(chars[first : last + 1], start, piece.start() + last + 1)
        )
    return words


def estimate_marks(text: str, *, rate: int, speed: float = 1.0) -> list[WordMark]:
    """Estimated marks of ``text``'s words at ``rate`` (the method of this module)."""
    marks, at = [], 0.0
    for word in speakable_words(text):
        letters = sum(_speakable(c) for c in word.text)
        span = (letters + GAP_UNITS) * MS_PER_UNIT / speed * rate / 1000
        marks.append(WordMark(word.text, round(at), round(at + span)))
        at += span
    return marks
