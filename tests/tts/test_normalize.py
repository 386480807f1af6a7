"""Text normalisation (docs/specs/tts-ws.md T1–T5, R7): golden cases and building blocks."""

from __future__ import annotations

import re

import pytest

from tts.normalize import (
    cardinal,
    clean_markup,
    has_speakable,
    normalize_text,
    ordinal,
    year,
)
from tts.text import segment_payload, segment_text

GOLDEN = [
    ("I have 3 apples.", "I have three apples."),
    ("It costs $5.50.", "It costs five dollars and fifty cents."),
    ("Pay ₹1,500 now", "Pay one thousand five hundred rupees now"),
    ("Rs. 250", "two hundred fifty rupees"),
    ("about 10% more", "about ten percent more"),
    ("the 3rd time", "the third time"),
    ("pi is 3.14", "pi is three point one four"),
    ("-7 degrees", "minus seven degrees"),
    ("in 1999", "in nineteen ninety-nine"),
    ("on 2024-03-05", "on March fifth, twenty twenty-four"),
    ("on 03/05/2024", "on March fifth, twenty twenty-four"),
    ("at 10:30", "at ten thirty"),
    ("Dr. Smith lives on Elm St.", "Doctor Smith lives on Elm Street."),
    ("No. 5", "number five"),
    ("St. Louis in 2005", "Saint Louis in two thousand five"),
]


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


@pytest.mark.parametrize(("text", "spoken"), GOLDEN)
def test_tts_t2_golden_table(text: str, spoken: str) -> None:
    assert squash(normalize_text(text)) == squash(spoken)


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("1,234,567 people", "one million two hundred thirty-four thousand five hundred sixty-seven people"),
        ("0 items", "zero items"),
        ("the 21st and 12th", "the twenty-first and twelfth"),
        ("the 100th", "the one hundredth"),
        ("$1 and $0.05", "one dollar and five cents"),
        ("£3.20", "three pounds and twenty pence"),
        ("€2", "two euros"),
        ("$1.5 million", "one point five million dollars"),
        ("250 USD", "two hundred fifty dollars"),
        ("99 INR", "ninety-nine rupees"),
        ("₹10.50", "ten rupees and fifty paise"),
        ("3.5%", "three point five percent"),
        ("in 1905", "in nineteen oh five"),
        ("in 1900", "in nineteen hundred"),
        ("in 2010", "in twenty ten"),
        ("at 9:05", "at nine oh five"),
        ("at 7:00", "at seven o'clock"),
        ("at 9:30 pm", "at nine thirty p m"),
        ("Mr. and Mrs. Lee", "Mister and Missus Lee"),
        ("Sam Jr. met Al Sr. there", "Sam Junior met Al Senior there"),
        ("cats vs. dogs", "cats versus dogs"),
        ("apples, pears, etc.", "apples, pears, et cetera."),
        ("e.g. this, i.e. that", "for example this, that is that"),
        ("say No. way", "say No. way"),
        ("version 2.0.1", "version two dot zero dot one"),
    ],
)  # fmt: skip
def test_tts_t2_more_rules(text: str, spoken: str) -> None:
    assert squash(normalize_text(text)) == squash(spoken)


def test_tts_t2_number_words() -> None:
    assert cardinal(250) == "two hundred fifty"
    assert cardinal(-7) == "minus seven"
    assert cardinal(10**12 + 1) == "one trillion one"
    assert [ordinal(n) for n in (1, 2, 3, 5, 8, 9, 12, 20, 21, 101)] == [
        "first", "second", "third", "fifth", "eighth", "ninth", "twelfth",
        "twentieth", "twenty-first", "one hundred first",
    ]  # fmt: skip
    assert [year(y) for y in (1100, 1999, 2000, 2009, 2099)] == [
        "eleven hundred", "nineteen ninety-nine", "two thousand", "two thousand nine",
        "twenty ninety-nine",
    ]  # fmt: skip


def test_tts_t2_long_digit_runs_are_read_digit_by_digit() -> None:
    assert normalize_text("id 1234567890123456") == (
        "id one two three four five six seven eight nine zero one two three four five six"
    )


def test_tts_t4_markdown_emoji_and_whitespace() -> None:
    assert clean_markup("# Title\n> **Bold** and _it_ and `code` 😀🎉  end") == (
        "Title Bold and it and code end"
    )
    assert normalize_text("snake_case stays  readable") == "snake_case stays readable"


def test_tts_t4_devanagari_passes_through_except_cleanup() -> None:
    text = "नमस्ते **दुनिया** 5 बजे।"
    assert normalize_text(text) == "नमस्ते दुनिया 5 बजे।"


def test_tts_t1_segments_carry_the_original_text_at_their_offsets() -> None:
    """The worker normalises each segment as it starts it (tests/tts/worker/test_jobs.py)."""
    text = "Pay $5.50 today, please. Then call Dr. Who at 10:30 sharp."
    payload = segment_payload(text, segment_text(text, chunking=True))
    assert len(payload) == 2
    assert "".join(piece["text"] for piece in payload) == text
    for piece in payload:
        assert piece["text"] == text[piece["char_start"] : piece["char_end"]]


def test_tts_r7_speakable_means_a_letter_or_digit() -> None:
    assert has_speakable("a") and has_speakable("5") and has_speakable("नमस्ते")
    assert not has_speakable("!!! ... 😀 — **")
