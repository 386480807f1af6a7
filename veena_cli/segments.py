"""Cut a long text into the segments ``veena say`` sends one request each.

Segments are the unit of resumption: each is a whole number of sentences (or, for a sentence
longer than the limit, a piece cut at whitespace), and together they cover the text exactly,
in order, without overlap. The server cuts each request into its own sentences again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_SEGMENT_CHARS = 1000
# A sentence ends at . ! ? … । ॥ followed by whitespace, or at a blank line.
_SENTENCE_END = re.compile(r"(?<=[.!?…।॥])[\"'”’)\]]*\s+|\n\s*\n")


@dataclass(frozen=True)
class TextSpan:
    """Text ``[start, end)`` of the source text; ``text`` is that slice."""

    index: int
    start: int
    end: int
    text: str


def sentences(text: str) -> list[tuple[int, int]]:
    """``[start, end)`` spans of the sentences of ``text``, trailing whitespace included."""
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        spans.append((start, match.end()))
        start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def _pieces(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """Cut ``[start, end)`` into pieces of at most ``limit`` characters, at whitespace."""
    pieces = []
    while end - start > limit:
        cut = text.rfind(" ", start + 1, start + limit)
        cut = cut + 1 if cut > start else start + limit
        pieces.append((start, cut))
        start = cut
    pieces.append((start, end))
    return pieces


def split_text(text: str, limit: int = DEFAULT_SEGMENT_CHARS) -> list[TextSpan]:
    """Group whole sentences into segments of at most ``limit`` characters."""
    if limit < 1:
        raise ValueError("limit must be positive")
    spans = [piece for s, e in sentences(text) for piece in _pieces(text, s, e, limit)]
    groups: list[tuple[int, int]] = []
    for start, end in spans:
        if groups and end - groups[-1][0] <= limit:
            groups[-1] = (groups[-1][0], end)
        else:
            groups.append((start, end))
    # A group with no letter or digit has nothing to speak (the server would refuse it).
    spoken = [(s, e) for s, e in groups if any(ch.isalnum() for ch in text[s:e])]
    return [TextSpan(i, s, e, text[s:e]) for i, (s, e) in enumerate(spoken)]
