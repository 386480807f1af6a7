"""Segmentation (docs/specs/tts-ws.md T6–T8, I3): sentences, merging, splitting, offsets."""

from __future__ import annotations

import random
import time

import pytest

from tts.text import SEGMENT_MAX_CHARS, Segment, TextBuffer, segment_text


def texts(text: str, segments: list[Segment]) -> list[str]:
    return [s.text_of(text) for s in segments]


def assert_covers(text: str, segments: list[Segment]) -> None:
    """T7: in order, without gaps or overlap, from 0 to the end."""
    assert segments[0].char_start == 0 and segments[-1].char_end == len(text)
    for a, b in zip(segments, segments[1:], strict=False):
        assert a.char_end == b.char_start
    assert [s.seq for s in segments] == list(range(len(segments)))


def test_tts_t6_step4_short_text_without_chunking_is_one_segment() -> None:
    text = "Hello world. How are you? I am fine."
    assert segment_text(text, chunking=False) == [Segment(0, 0, len(text))]


def test_tts_t6_sentence_ends_and_merge_of_short_sentences() -> None:
    text = "Hello world. How are you today, my friend? Fine! Thanks for asking me that."
    got = texts(text, segment_text(text, chunking=True))
    assert got == [
        "Hello world. How are you today, my friend?",
        " Fine! Thanks for asking me that.",
    ]


def test_tts_t6_the_last_short_sentence_joins_the_previous() -> None:
    text = "This sentence is long enough to stand alone. Bye."
    assert texts(text, segment_text(text, chunking=True)) == [text]


@pytest.mark.parametrize(
    "text",
    [
        "Dr. Smith and Mr. Jones met at St. Louis with Mrs. Brown, etc. and so on here.",
        "The value of pi is 3.14159 and e is 2.71828 which is quite remarkable indeed.",
        "He met J. K. Rowling and J. R. R. Tolkien at the book fair, e.g. in London.",
        "Use the No. 5 bus vs. the train, i.e. the cheaper one for the long journey.",
    ],
)
def test_tts_t6_no_break_after_abbreviations_initials_or_between_digits(
    text: str,
) -> None:
    assert texts(text, segment_text(text, chunking=True)) == [text]


def test_tts_t6_other_sentence_ends_and_line_breaks() -> None:
    text = (
        "यह पहला वाक्य है जो लंबा है। यह दूसरा वाक्य है जो भी लंबा है॥ Wait for it… "
        "then more text here\nand a new line that is long enough"
    )
    got = texts(text, segment_text(text, chunking=True))
    assert got[0].endswith("है।") and got[1].endswith("है॥")
    assert any(piece.endswith("here\n") for piece in got)


def test_tts_t6_long_sentences_split_at_soft_break_then_whitespace_then_hard() -> None:
    clause = "word " * 30  # 150 chars
    text = clause + "and then, " + clause + "end."
    pieces = texts(text, segment_text(text, chunking=True))
    assert pieces[0].endswith("then,") and all(len(p) <= 200 for p in pieces)
    spaced = "abcdefghi " * 50
    assert all(
        p.endswith(" ") or p == pieces[-1]
        for p in texts(spaced, segment_text(spaced, chunking=True))
    )
    solid = "x" * 450
    assert [len(p) for p in texts(solid, segment_text(solid, chunking=True))] == [
        200,
        200,
        50,
    ]


def test_tts_t7_segments_cover_random_texts() -> None:
    rng = random.Random(7)
    words = ["alpha", "beta.", "gamma,", "Dr.", "3.14", "x!", "why?", "\n", "—", "   "]
    for _ in range(200):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 400)))
        if not text:
            continue
        for chunking in (True, False):
            segments = segment_text(text, chunking=chunking)
            assert_covers(text, segments)
            assert all(
                s.char_end - s.char_start <= SEGMENT_MAX_CHARS for s in segments
            ) or (
                not chunking and len(segments) == 1 and len(text) <= SEGMENT_MAX_CHARS
            )


def test_tts_t8_fifty_thousand_characters_segment_quickly() -> None:
    text = ("The quick brown fox jumps over the lazy dog, again and again. " * 900)[
        :50_000
    ]
    started = time.perf_counter()
    segments = segment_text(text, chunking=False)
    assert time.perf_counter() - started < 0.5
    assert_covers(text, segments)
    assert len(segments[0].text_of(text)) <= SEGMENT_MAX_CHARS


def test_tts_i3_buffer_cuts_complete_sentences_only() -> None:
    buffer = TextBuffer()
    first = buffer.append("Sure, I can help. Your order ")
    assert texts(buffer.text, first) == ["Sure, I can help."]
    assert buffer.append("ships tomorrow.") == []  # no whitespace after the end yet
    assert buffer.pending
    second = buffer.append(" And")
    assert texts(buffer.text, second) == [" Your order ships tomorrow."]
    rest = buffer.drain()
    assert texts(buffer.text, rest) == [" And"] and not buffer.pending
    assert [s.seq for s in first + second + rest] == [0, 1, 2]
    assert_covers(buffer.text, first + second + rest)


def test_tts_i3_buffer_over_the_maximum_is_cut_without_a_sentence_end() -> None:
    buffer = TextBuffer()
    segments = buffer.append("word, " * 60)  # 360 chars, no sentence end
    assert segments and all(s.char_end - s.char_start <= 200 for s in segments)
    assert buffer.pending


def test_tts_c2_buffer_clear_discards_and_keeps_offsets() -> None:
    buffer = TextBuffer()
    buffer.append("Half a sentence")
    buffer.clear()
    assert not buffer.pending and buffer.drain() == []
    (segment,) = buffer.append("New text. ") + buffer.drain()
    assert segment.char_start == len("Half a sentence")
