"""Text segmentation (specs/tts-ws.md T6–T7): sentences with code-point offsets, pure functions."""

from __future__ import annotations

import re
from dataclasses import dataclass

SEGMENT_MIN_CHARS = 20
SEGMENT_MAX_CHARS = 200
ABBREVIATIONS = ("dr", "mr", "mrs", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "no")
_SENTENCE_END = re.compile(r"(?:[.!?…।॥]+)(?=\s|$)|\n+")
_SOFT_BREAKS = ",;:—–"


@dataclass(frozen=True)
class Segment:
    """A piece of the request text synthesised as one engine call."""

    seq: int
    char_start: int
    char_end: int

    def text_of(self, text: str) -> str:
        """This segment's substring of ``text``."""
        return text[self.char_start : self.char_end]


def _is_sentence_end(text: str, match: re.Match[str]) -> bool:
    if match.group().startswith("\n"):
        return True
    before = text[: match.start()].split()
    word = before[-1].lower() if before else ""
    if match.group() == "." and (
        word in ABBREVIATIONS or re.fullmatch(r"[A-Za-z]", word)
    ):
        return False
    return True


def _sentences(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        if _is_sentence_end(text, match):
            spans.append((start, match.end()))
            start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    return [(a, b) for a, b in spans if text[a:b].strip()]


def _merge_short(
    spans: list[tuple[int, int]], text: str, min_chars: int
) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    pending: tuple[int, int] | None = None
    for a, b in spans:
        if pending is not None:
            a, pending = pending[0], None
        if len(text[a:b].strip()) < min_chars:
            pending = (a, b)
        else:
            merged.append((a, b))
    if pending is not None:
        if merged:
            merged[-1] = (merged[-1][0], pending[1])
        else:
            merged.append(pending)
    return merged


def _split_long(a: int, b: int, text: str, max_chars: int) -> list[tuple[int, int]]:
    out = []
    while b - a > max_chars:
        window = text[a : a + max_chars]
        cut = max(window.rfind(c) for c in _SOFT_BREAKS)
        if cut <= 0:
            cut = window.rfind(" ")
        cut = cut + 1 if cut > 0 else max_chars
        out.append((a, a + cut))
        a += cut
    out.append((a, b))
    return out


def segment_text(
    text: str,
    *,
    chunking: bool,
    min_chars: int = SEGMENT_MIN_CHARS,
    max_chars: int = SEGMENT_MAX_CHARS,
) -> list[Segment]:
    """Cut ``text`` into ordered, non-overlapping segments that cover all of it."""
    if not chunking and len(text) <= max_chars:
        return [Segment(seq=0, char_start=0, char_end=len(text))]
    spans = _merge_short(_sentences(text), text, min_chars)
    pieces = [p for a, b in spans for p in _split_long(a, b, text, max_chars)]
    if pieces:
        pieces[0] = (0, pieces[0][1])
        pieces[-1] = (pieces[-1][0], len(text))
    return [Segment(seq=i, char_start=a, char_end=b) for i, (a, b) in enumerate(pieces)]
