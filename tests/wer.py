"""Word error rate for engine tests: word edit distance after normalisation."""

from __future__ import annotations

import re

_NOT_WORD = re.compile(r"[^\w\s]")
_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen"
    " fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def _spoken(word: str) -> list[str]:
    """A number under 100 written in digits as the words Whisper may write instead ("7"
    and "seven" are the same word to a listener); any other word as it is."""
    if not word.isdigit() or int(word) >= 100:
        return [word]
    n = int(word)
    if n < 20:
        return [_ONES[n]]
    return [_TENS[n // 10]] + ([_ONES[n % 10]] if n % 10 else [])


def normalized_words(text: str) -> list[str]:
    """Lower-case, split hyphenated words, drop punctuation, split on whitespace, and spell
    numbers under 100."""
    words = _NOT_WORD.sub("", text.lower().replace("-", " ")).split()
    return [spoken for word in words for spoken in _spoken(word)]


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    """Return the Levenshtein distance between two word lists."""
    previous = list(range(len(hyp) + 1))
    for i, ref_word in enumerate(ref, start=1):
        current = [i]
        for j, hyp_word in enumerate(hyp, start=1):
            substitution = previous[j - 1] + (ref_word != hyp_word)
            current.append(min(previous[j] + 1, current[j - 1] + 1, substitution))
        previous = current
    return previous[-1]


def word_error_rate(ref: str, hyp: str) -> float:
    """Return (substitutions + deletions + insertions) / reference words."""
    ref_words, hyp_words = normalized_words(ref), normalized_words(hyp)
    if not ref_words:
        return float(len(hyp_words))
    return edit_distance(ref_words, hyp_words) / len(ref_words)
