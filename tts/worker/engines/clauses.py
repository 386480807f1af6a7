"""A stream's first sentence cut at a clause boundary, so its first audio comes sooner (issue 13).

Piper synthesizes a sentence in one run and the stream's first audio waits for the whole of its
first sentence; a long first sentence with a clause mark in it is cut after the mark, and each
part runs on its own (the rest of the stream keeps whole sentences). Both parts keep at least
``min_phonemes`` phonemes, so the cut never leaves a word or two on its own.
"""

from __future__ import annotations

from collections.abc import Sequence

# The marks espeak-ng keeps in Piper's phonemes that close a clause inside a sentence.
CLAUSE_MARKS = frozenset(",;:")


def cut_first_clause(
    sentences: Sequence[list[str]], min_phonemes: int
) -> list[list[str]]:
    """``sentences`` with the first cut after its first clause mark that leaves at least
    ``min_phonemes`` phonemes on both sides; unchanged when none does (or ``min_phonemes`` is 0)."""
    if min_phonemes <= 0 or not sentences:
        return list(sentences)
    first = sentences[0]
    for index, phoneme in enumerate(first):
        if phoneme not in CLAUSE_MARKS:
            continue
        start = index + 1  # the next clause begins after the mark's spaces
        while start < len(first) and first[start].isspace():
            start += 1
        head, tail = first[: index + 1], first[start:]
        if min(len(head), len(tail)) >= min_phonemes:
            return [head, tail, *sentences[1:]]
    return list(sentences)
