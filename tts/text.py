"""Text segmentation (docs/specs/tts-ws.md T6–T7, I3): sentences with code-point offsets, and
the worker's segments made of them (R7), pure code. A segment carries its original text: the
worker normalises each one just before it is spoken (T1, T5), so a long text's first audio
never waits for the rest of it to be normalised (T8).

Segments always cover the text in order without gaps or overlap: the whitespace between two
sentences belongs to the later one. A segment with nothing to say (no letter or digit) is left
out of the worker's segments: a text with none left has no speakable content (R7).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tts.normalize import has_speakable

OFF_LOOP_CHARS = 2000  # T1: longer texts are segmented in a thread

SEGMENT_MIN_CHARS = 20
SEGMENT_MAX_CHARS = 200
# The T2 abbreviations: a period after them never ends a sentence.
ABBREVIATIONS = frozenset(
    ("dr", "mr", "mrs", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "no")
)
_SENTENCE_END = re.compile(r"[.!?…।॥]+(?=\s|$)|\n+")
_WORD_BEFORE = re.compile(r"(\S+)$")
_SOFT_BREAK = re.compile(r"[,;:—–]")
_WHITESPACE = re.compile(r"\s")
_LOOKBACK = 12  # longest abbreviation plus its punctuation, with room

Span = tuple[int, int]


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
    mark = match.group()
    if mark.startswith("\n"):
        return True
    if mark != ".":
        return True
    before = _WORD_BEFORE.search(text, max(0, match.start() - _LOOKBACK), match.start())
    word = before.group(1).lstrip("([{\"'") if before else ""
    return word.lower() not in ABBREVIATIONS and not re.fullmatch(r"[A-Z]", word)


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """Step 1 of T6: contiguous sentence spans of ``text[start:end]``."""
    end = len(text) if end is None else end
    cuts = [
        m.end()
        for m in _SENTENCE_END.finditer(text, start, end)
        if _is_sentence_end(text, m)
    ]
    spans, a = [], start
    for b in cuts:
        if text[a:b].strip():
            spans.append((a, b))
            a = b
    if a < end:
        if text[a:end].strip() or not spans:
            spans.append((a, end))
        else:  # trailing whitespace joins the last sentence
            spans[-1] = (spans[-1][0], end)
    return spans


def merge_short(spans: list[Span], text: str, min_chars: int) -> list[Span]:
    """Step 2 of T6: a sentence under ``min_chars`` joins the next (the last, the previous)."""
    merged: list[Span] = []
    pending: int | None = None
    for a, b in spans:
        if pending is not None:
            a, pending = pending, None
        if len(text[a:b].strip()) < min_chars:
            pending = a
        else:
            merged.append((a, b))
    if pending is not None:
        tail = (pending, spans[-1][1])
        merged[-1:] = [(merged[-1][0], tail[1])] if merged else [tail]
    return merged


def split_long(a: int, b: int, text: str, max_chars: int) -> list[Span]:
    """Step 3 of T6: cut after the last soft break, else the last whitespace, else hard."""
    out = []
    while b - a > max_chars:
        window = text[a : a + max_chars]
        cut = _last(_SOFT_BREAK, window)
        if cut <= 0:
            cut = _last(_WHITESPACE, window)
        cut = cut + 1 if cut > 0 else max_chars
        out.append((a, a + cut))
        a += cut
    out.append((a, b))
    return out


def _last(pattern: re.Pattern[str], window: str) -> int:
    found = -1
    for found_match in pattern.finditer(window):
        found = found_match.start()
    return found


def segment_spans(
    text: str,
    start: int,
    end: int,
    *,
    min_chars: int = SEGMENT_MIN_CHARS,
    max_chars: int = SEGMENT_MAX_CHARS,
) -> list[Span]:
    """Steps 1–3 of T6 over ``text[start:end]``."""
    spans = merge_short(sentence_spans(text, start, end), text, min_chars)
    return [p for a, b in spans for p in split_long(a, b, text, max_chars)]


def segment_text(
    text: str,
    *,
    chunking: bool,
    min_chars: int = SEGMENT_MIN_CHARS,
    max_chars: int = SEGMENT_MAX_CHARS,
) -> list[Segment]:
    """Cut ``text`` into ordered, non-overlapping segments that cover all of it (T6 step 4)."""
    if not chunking and len(text) <= max_chars:
        return [Segment(seq=0, char_start=0, char_end=len(text))]
    spans = segment_spans(text, 0, len(text), min_chars=min_chars, max_chars=max_chars)
    return [Segment(seq=i, char_start=a, char_end=b) for i, (a, b) in enumerate(spans)]


def segment_payload(source: str, segments: Iterable[Segment]) -> list[dict[str, Any]]:
    """Worker segments: their text with offsets into ``source`` (T7); those with nothing
    speakable are left out (R7)."""
    payload = []
    for segment in segments:
        text = segment.text_of(source)
        if not has_speakable(text):
            continue
        payload.append(
            {
                "seq": segment.seq,
                "text": text,
                "char_start": segment.char_start,
                "char_end": segment.char_end,
            }
        )
    return payload


def text_payload(
    text: str, *, chunking: bool, min_chars: int, max_chars: int
) -> list[dict[str, Any]]:
    """A whole request text segmented (T6): its worker segments."""
    segments = segment_text(
        text, chunking=chunking, min_chars=min_chars, max_chars=max_chars
    )
    return segment_payload(text, segments)


@dataclass
class TextBuffer:
    """Incremental text of one request (I2–I3): appended pieces, cut into segments."""

    min_chars: int = SEGMENT_MIN_CHARS
    max_chars: int = SEGMENT_MAX_CHARS
    text: str = field(default="", repr=False)
    cut_at: int = 0  # text before this offset has been cut into segments (or cleared)
    next_seq: int = 0

    @property
    def pending(self) -> bool:
        """True while some buffered text has not been cut into a segment."""
        return bool(self.text[self.cut_at :].strip())

    def append(self, piece: str) -> list[Segment]:
        """Add ``piece``; return the segments that are complete now (I3)."""
        self.text += piece
        end = self._last_sentence_end()
        segments = self._cut(end) if end > self.cut_at else []
        if len(self.text) - self.cut_at > self.max_chars:
            spans = split_long(self.cut_at, len(self.text), self.text, self.max_chars)
            segments += self._emit(spans[:-1])
        return segments

    def drain(self) -> list[Segment]:
        """Cut everything buffered (flush, end, buffer delay)."""
        return self._cut(len(self.text))

    def clear(self) -> None:
        """Discard the buffered text (C2); offsets keep counting."""
        self.cut_at = len(self.text)

    def _last_sentence_end(self) -> int:
        """Offset after the last sentence end that is followed by whitespace."""
        last = self.cut_at
        for match in _SENTENCE_END.finditer(self.text, self.cut_at):
            followed = match.end() < len(self.text)
            if followed and _is_sentence_end(self.text, match):
                last = match.end()
        return last

    def _cut(self, end: int) -> list[Segment]:
        if not self.text[self.cut_at : end].strip():
            return []
        spans = segment_spans(
            self.text,
            self.cut_at,
            end,
            min_chars=self.min_chars,
            max_chars=self.max_chars,
        )
        return self._emit(spans)

    def _emit(self, spans: list[Span]) -> list[Segment]:
        segments = []
        for a, b in spans:
            segments.append(Segment(seq=self.next_seq, char_start=a, char_end=b))
            self.next_seq += 1
            self.cut_at = b
        return segments


async def prepare_pieces(source: str, segments: list[Segment]) -> list[dict[str, Any]]:
    """Incremental segments (§9.2), made off the loop when they are long (T1)."""
    size = sum(s.char_end - s.char_start for s in segments)
    if size > OFF_LOOP_CHARS:
        return await asyncio.to_thread(segment_payload, source, segments)
    return segment_payload(source, segments)
