"""Word error rate for engine tests: word edit distance after normalisation."""

from __future__ import annotations

import re

_NOT_WORD = re.compile(r"[^\w\s]")
_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen"
    " fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


_SCALES = ((10**9, "billion"), (10**6, "million"), (1000, "thousand"), (100, "hundred"))
_SCALE_WORDS = frozenset(name for _, name in _SCALES)


def spelled(n: int) -> list[str]:
    """``n`` (a non-negative integer) as English words: 1000 is "one thousand"."""
    for size, name in _SCALES:
        if n >= size:
            rest = spelled(n % size) if n % size else []
            return [*spelled(n // size), name, *rest]
    if n < 20:
        return [_ONES[n]]
    return [_TENS[n // 10]] + ([_ONES[n % 10]] if n % 10 else [])


def _spoken(word: str) -> list[str]:
    """A number written in digits as the words Whisper may write instead ("7" and "seven",
    "1000" and "a thousand" are the same words to a listener); any other word as it is."""
    return spelled(int(word)) if word.isdigit() and len(word) <= 12 else [word]


def normalized_words(text: str) -> list[str]:
    """Lower-case, split hyphenated words, drop punctuation, split on whitespace, spell
    numbers, and read "a" before a scale word as "one" ("a thousand" is "one thousand")."""
    words = _NOT_WORD.sub("", text.lower().replace("-", " ")).split()
    spoken = [part for word in words for part in _spoken(word)]
    return [
        "one"
        if word == "a" and spoken[i + 1 : i + 2] and spoken[i + 1] in _SCALE_WORDS
        else word
        for i, word in enumerate(spoken)
    ]


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
