"""A leading segment's first sentence cut at a clause mark (issue 13), without the model."""

from __future__ import annotations

from tts.worker.engines.clauses import cut_first_clause


def phonemes(text: str) -> list[str]:
    return list(text)


SENTENCE = phonemes(
    "ˈɛvɹi mˈɔːɹnɪŋ ðə mˈɑːɹkɪt ˈoʊpənz ˈɜːli, ænd ðə vˈɛndɚz sˈɛt ˈaʊt."
)
NEXT = phonemes("ðə fˈɜːst kˈʌstəmɚz ɚɹˈaɪv.")


def test_the_first_sentence_is_cut_after_its_clause_mark() -> None:
    head, tail, rest = cut_first_clause([SENTENCE, NEXT], 20)

    assert "".join(head) == "ˈɛvɹi mˈɔːɹnɪŋ ðə mˈɑːɹkɪt ˈoʊpənz ˈɜːli,"
    assert (
        "".join(tail) == "ænd ðə vˈɛndɚz sˈɛt ˈaʊt."
    )  # the space after the mark dropped
    assert rest == NEXT


def test_only_the_first_sentence_is_cut() -> None:
    assert cut_first_clause([NEXT, SENTENCE], 20) == [NEXT, SENTENCE]


def test_a_mark_that_would_leave_a_short_part_is_passed_over() -> None:
    text = phonemes("wˈɛl, aɪ sˈoʊ; mˈeɪbiː ðə bˈʌs ɪz lˈeɪt: jˈɛs ɪt ɪz lˈeɪt ɐɡˈɛn.")
    head, tail = cut_first_clause([text], 20)
    # "wˈɛl," (5) and "... sˈoʊ;" (14) are too short; the colon leaves 20 or more either side
    assert "".join(head).endswith("lˈeɪt:")
    assert "".join(tail) == "jˈɛs ɪt ɪz lˈeɪt ɐɡˈɛn."


def test_no_cut_without_a_mark_with_room_on_both_sides() -> None:
    short_tail = phonemes("ˈɛvɹi mˈɔːɹnɪŋ ðə mˈɑːɹkɪt ˈoʊpənz ˈɜːli, jˈɛs.")
    assert cut_first_clause([short_tail], 20) == [short_tail]
    assert cut_first_clause([NEXT], 20) == [NEXT]
    assert cut_first_clause([], 20) == []


def test_zero_never_cuts() -> None:
    assert cut_first_clause([SENTENCE], 0) == [SENTENCE]
