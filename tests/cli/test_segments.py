"""``veena say`` segmentation: whole sentences, within the limit, covering the text in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from veena_cli.segments import split_text

BOOK = (Path(__file__).parent / "book.txt").read_text()


def covered(text: str, limit: int) -> None:
    segments = split_text(text, limit)
    assert [s.index for s in segments] == list(range(len(segments)))
    assert all(s.text == text[s.start : s.end] for s in segments)
    assert all(a.end <= b.start for a, b in zip(segments, segments[1:], strict=False))
    assert all(len(s.text) <= limit for s in segments)
    # Only text without letters or digits may be left out.
    gaps = [text[a.end : b.start] for a, b in zip(segments, segments[1:], strict=False)]
    outside = text[: segments[0].start] + "".join(gaps) + text[segments[-1].end :]
    assert not any(ch.isalnum() for ch in outside)


@pytest.mark.parametrize("limit", [50, 200, 500, 1000, 100_000])
def test_segments_cover_the_book_within_the_limit(limit: int) -> None:
    covered(BOOK, limit)


def test_segments_end_at_sentence_ends() -> None:
    segments = split_text(BOOK, 500)
    assert len(segments) >= 10
    assert all(s.text.rstrip()[-1] in ".!?" for s in segments)


def test_a_long_sentence_is_cut_at_whitespace() -> None:
    text = "word " * 100 + "end."
    segments = split_text(text, 64)
    covered(text, 64)
    assert all(s.text.endswith(" ") for s in segments[:-1])


def test_a_word_longer_than_the_limit_is_cut_hard() -> None:
    covered("x" * 130, 50)


def test_text_without_letters_or_digits_has_no_segment() -> None:
    assert split_text("... --- !!!\n\n", 10) == []


def test_abbreviations_do_not_break_short_texts() -> None:
    assert len(split_text("Dr. Smith met Mr. Jones.", 1000)) == 1
