"""The word error rate the engine tests measure with (``tests.wer``)."""

from __future__ import annotations

from tests.wer import normalized_words, word_error_rate


def test_numbers_in_digits_and_in_words_are_the_same_words() -> None:
    assert normalized_words("7 and 42") == normalized_words("seven and forty-two")
    assert normalized_words("1,000 miles") == normalized_words("a thousand miles")
    assert normalized_words("2500") == "two thousand five hundred".split()
    assert normalized_words("3000000") == "three million".split()


def test_a_misheard_word_beside_a_number_is_one_error() -> None:
    reference = "A journey of a thousand miles begins with a single step."
    heard = "A journey that 1000 miles begins with a single step."
    assert word_error_rate(reference, heard) == 1 / 11


def test_a_is_only_one_before_a_scale_word() -> None:
    assert normalized_words("a cat, a hundred") == ["a", "cat", "one", "hundred"]
