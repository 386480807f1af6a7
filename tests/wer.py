"""Word error rate for engine tests: word edit distance after normalisation."""

from __future__ import annotations

import re

_NOT_WORD = re.compile(r"[^\w\s]")


def normalized_words(text: str) -> list[str]:
    """Lower-case, split hyphenated words, drop punctuation and split on whitespace."""
    return _NOT_WORD.sub("", text.lower().replace("-", " ")).split()


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
