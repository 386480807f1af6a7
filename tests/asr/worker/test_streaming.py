"""The §14 streaming algorithm with scripted hypotheses (no engine, no event loop)."""

from __future__ import annotations

import math
import random

import pytest

from asr.messages import DELTAS
from asr.whisper import MODEL_RATE
from asr.worker.engines.base import AsrHypothesis, Token, Word
from asr.worker.hypothesis import pieces, token_entries
from asr.worker.streaming import DecodePlan, Emission, WordStreamState


def hyp(text: str, ends: list[float] | None = None, prob: float = 0.8) -> AsrHypothesis:
    """A hypothesis with one token a piece (log ``prob``), and word times with ``ends``."""
    words = ()
    parts = pieces(text)
    if ends is not None:
        assert len(parts) == len(ends)
        words = tuple(
            Word(text=p, start=max(0.0, e - 0.3), end=e, probability=prob)
            for p, e in zip(parts, ends, strict=True)
        )
    tokens = tuple(
        Token((" " if i else "") + p.lstrip(), math.log(prob))
        for i, p in enumerate(parts)
    )
    return AsrHypothesis(text=text, words=words, tokens=tokens)


def final_of(state: WordStreamState, final: AsrHypothesis) -> Emission:
    """The remainder of a final decode of the current window (SA-7)."""
    plan = DecodePlan(state.window_start, 0, "", "", words=False, final=True)
    return state.on_final(final, plan).remainder


def run(hypotheses: list[str], final: str, **options: object) -> tuple[list[str], str]:
    """Feed chunk hypotheses then a final one; return the deltas and the transcript."""
    state = WordStreamState(**options)  # type: ignore[arg-type]
    deltas = []
    for n, text in enumerate(hypotheses, start=1):
        plan = state.plan(n * MODEL_RATE, final=False)
        emission = state.on_chunk(hyp(text), plan)
        if emission is not None:
            deltas.append(emission.text)
    state.plan(len(hypotheses) * MODEL_RATE, final=True)
    remainder = final_of(state, hyp(final)).text
    if remainder:
        deltas.append(remainder)
    assert state.emitted == "".join(deltas)
    return deltas, state.emitted


GROWING_EN = [
    "Hello",
    "Hello world, this",
    "Hello world, this is a",
    "Hello world, this is a test of",
    "Hello world, this is a test of the speech",
    "Hello world, this is a test of the speech gateway.",
]


@pytest.mark.parametrize(
    ("hypotheses", "final"),
    [
        (GROWING_EN, "Hello world, this is a test of the speech gateway."),
        (
            [
                "It costs",
                "It costs 42 dollars,",
                "It costs 42 dollars, and 7",
                "It costs 42 dollars, and 7 cents.",
            ],
            "It costs $42, and 7 cents!",
        ),
        (
            [
                "Guten",
                "Guten Tag, wie",
                "Guten Tag, wie geht es",
                "Guten Tag, wie geht es Ihnen heute?",
            ],
            "Guten Tag, wie geht es Ihnen heute?",
        ),
        (
            ["你好", "你好，世界。", "你好，世界。今天天气"],
            "你好，世界。今天天气很好。",
        ),
    ],
)
def test_asr_it8_deltas_join_to_transcript(hypotheses: list[str], final: str) -> None:
    deltas, transcript = run(hypotheses, final, transcript=DELTAS)
    assert "".join(deltas) == transcript
    assert all(deltas)
    assert not deltas[0][:1].isspace()
    assert all(d[:1].isspace() for d in deltas[1:] if d[:1].isascii())


def test_asr_sa5_words_wait_for_agreement_and_the_unfixed_tail() -> None:
    state = WordStreamState(unfixed_words=3)
    plan = state.plan(MODEL_RATE, final=False)
    assert state.on_chunk(hyp("one two three four five"), plan) is None  # no Hprev yet
    plan = state.plan(2 * MODEL_RATE, final=False)
    emitted = state.on_chunk(hyp("one two three four five six"), plan)
    assert emitted is not None and emitted.text == "one two three"
    plan = state.plan(3 * MODEL_RATE, final=False)
    # "four" changed: nothing new is confirmed, nothing is retracted.
    assert state.on_chunk(hyp("one two three for five six seven"), plan) is None
    assert state.emitted == "one two three"


def test_agreement_is_with_a_hypothesis_of_audio_agree_samples_shorter() -> None:
    """Issue 13 (ASR_AGREE_S): at a 0.2 s cadence two consecutive hypotheses both end in
    the word being spoken; a word is confirmed once a hypothesis of audio at least
    ``agree_samples`` shorter had it too."""
    step = MODEL_RATE // 5
    state = WordStreamState(unfixed_words=0, agree_samples=3 * step)
    said = ["is", "is", "His daughter", "His daughter", "His daughter lived"]
    shown = []
    for n, text in enumerate(said, start=1):
        emission = state.on_chunk(hyp(text), state.plan(n * step, final=False))
        shown.append(emission.text if emission else None)
    # "is" agreed only with hypotheses 0.2 and 0.4 s older; by 0.8 s the one from 0.2 s
    # (0.6 s older) said "is" where this one says "His": nothing is confirmed.
    assert shown == [None, None, None, None, None]
    emission = state.on_chunk(
        hyp("His daughter lived in"), state.plan(6 * step, final=False)
    )
    assert emission is not None and emission.text == "His daughter"  # as said at 0.6 s
    # The previous hypothesis alone (agree_samples 0) had confirmed the misheard "is".
    quick = WordStreamState(unfixed_words=0)
    quick.on_chunk(hyp("is"), quick.plan(step, final=False))
    first = quick.on_chunk(hyp("is"), quick.plan(2 * step, final=False))
    assert first is not None and first.text == "is"


def test_agree_followed_confirms_a_word_the_previous_hypothesis_heard_before_another() -> (
    None
):
    """Issue 13 (ASR_AGREE_FOLLOWED): a word the previous hypothesis, however close, agrees
    on is confirmed when the new one holds ``agree_followed`` words after it, and before
    ``followed_both_samples`` of the item the previous one too; a hypothesis' last word is
    not."""
    step = MODEL_RATE // 5
    said = ["His", "His daughter", "His daughter lived", "His daughter lived in"]

    def shown(both_until: int = 0) -> list[str | None]:
        state = WordStreamState(
            unfixed_words=0,
            agree_samples=3 * step,
            agree_followed=1,
            followed_both_samples=both_until,
        )
        out = []
        for n, text in enumerate(said, start=1):
            emission = state.on_chunk(hyp(text), state.plan(n * step, final=False))
            out.append(emission.text if emission else None)
        return out

    # "His" is followed by "daughter" in the second hypothesis, and the first agrees on it;
    # "daughter", the second's last word, waits for the third.
    assert shown() == [None, "His", " daughter", " lived"]
    # The previous hypothesis also holding a word after it: each word one hypothesis later.
    assert shown(both_until=10 * MODEL_RATE) == [None, None, "His", " daughter"]
    # Both until the item holds 0.6 s (the third hypothesis), the new one's after it.
    assert shown(both_until=3 * step) == [None, None, "His daughter", " lived"]
    # Disagreement on the word stops it whatever follows it ("is" for "His").
    other = WordStreamState(unfixed_words=0, agree_samples=3 * step, agree_followed=1)
    other.on_chunk(hyp("is daughter"), other.plan(step, final=False))
    assert (
        other.on_chunk(hyp("His daughter"), other.plan(2 * step, final=False)) is None
    )
    # Off (0), the same hypotheses wait for agreement over agree_samples: "His" at the
    # fourth, with the first's.
    off = WordStreamState(unfixed_words=0, agree_samples=3 * step)
    late = [
        off.on_chunk(hyp(t), off.plan(n * step, final=False))
        for n, t in enumerate(said, 1)
    ]
    assert [e.text if e else None for e in late] == [None, None, None, "His"]


def test_asr_sa5_hypothesis_disagreeing_with_emitted_text_emits_nothing() -> None:
    state = WordStreamState(unfixed_words=0)
    for n, text in enumerate(["a b c", "a b c"], start=1):
        state.on_chunk(hyp(text), state.plan(n * MODEL_RATE, final=False))
    assert state.emitted == "a b c"
    plan = state.plan(3 * MODEL_RATE, final=False)
    assert state.on_chunk(hyp("x y c d e"), plan) is None
    assert state.emitted == "a b c"


def test_asr_sa3_prefix_forced_after_unfixed_chunks_with_leading_space() -> None:
    state = WordStreamState(
        unfixed_words=1, unfixed_chunks=2, prompt="Django, Channels"
    )
    first = state.plan(MODEL_RATE, final=False)
    assert first.prefix == "" and first.prompt == "Django, Channels"
    state.on_chunk(hyp("Hello world"), first)
    second = state.plan(2 * MODEL_RATE, final=False)
    assert second.prefix == ""
    state.on_chunk(hyp("Hello world again"), second)
    third = state.plan(3 * MODEL_RATE, final=False)
    assert state.emitted == "Hello world"
    assert third.prefix == " Hello world"
    final = state.plan(3 * MODEL_RATE, final=True)
    assert final.prefix == " Hello world" and final.final


def test_asr_sa7_final_not_starting_with_window_text_skips_as_many_pieces() -> None:
    state = WordStreamState(unfixed_words=0)
    for n in (1, 2):
        state.on_chunk(hyp("one two"), state.plan(n * MODEL_RATE, final=False))
    assert state.emitted == "one two"
    assert final_of(state, hyp("won too three")).text == " three"
    assert state.emitted == "one two three"


def test_asr_sa6_window_slides_to_the_last_confirmed_word() -> None:
    state = WordStreamState(
        unfixed_words=1, chunk_samples=MODEL_RATE, window_samples=4 * MODEL_RATE
    )
    texts = ["a b c", "a b c d", "a b c d e"]
    for n, text in enumerate(texts, start=2):
        plan = state.plan(n * MODEL_RATE, final=False)
        assert plan.words == (n * MODEL_RATE > 2 * MODEL_RATE)
        ends = [0.5 * (i + 1) for i in range(len(pieces(text)))]
        state.on_chunk(hyp(text, ends), plan)
    assert state.emitted == "a b c d"
    assert state.confirmed_end == 2 * MODEL_RATE  # "d" ends at 2.0 s
    plan = state.plan(5 * MODEL_RATE, final=False)  # 5 s > 4 s window
    assert plan.start == 2 * MODEL_RATE
    assert plan.prefix == "" and plan.prompt.endswith("a b c d")
    emitted = state.on_chunk(hyp("e f g", [0.5, 1.0, 1.5]), plan)
    assert emitted is None  # no Hprev in the new window yet
    state.on_chunk(
        hyp("e f g h", [0.5, 1.0, 1.5, 2.0]), state.plan(5 * MODEL_RATE, final=False)
    )
    assert state.emitted == "a b c d e f g"


def segment_hyp(text: str, ends: dict[int, float]) -> AsrHypothesis:
    """Words timed only at segment ends (Whisper on vLLM): ``ends`` by piece index."""
    words = tuple(Word(text=p, end=ends.get(i)) for i, p in enumerate(pieces(text)))
    return AsrHypothesis(text=text, words=words)


def test_asr_sa6_segment_times_move_the_window_to_a_segment_end_only() -> None:
    state = WordStreamState(
        unfixed_words=1, chunk_samples=MODEL_RATE, window_samples=6 * MODEL_RATE
    )
    # Two segments, "a b." (ends 2.0 s) and "c d e" (open); "a b. c d" gets confirmed.
    for n in (5, 6):
        plan = state.plan(n * MODEL_RATE, final=False)
        assert plan.words  # near the window's edge
        state.on_chunk(segment_hyp("a b. c d e", {1: 2.0}), plan)
    assert state.emitted == "a b. c d"
    assert state.confirmed_end == 2 * MODEL_RATE
    plan = state.plan(7 * MODEL_RATE, final=False)  # 7 s > 6 s window
    # The window starts at the segment end; "c d" was confirmed after it and stays as Ew.
    assert plan.start == 2 * MODEL_RATE
    assert state.window_text == " c d"
    assert plan.prompt == "a b."
    for _ in range(2):
        emitted = state.on_chunk(
            segment_hyp("c d e f g", {}), state.plan(7 * MODEL_RATE, final=False)
        )
    assert emitted is not None and emitted.text == " e f"
    assert state.emitted == "a b. c d e f"  # nothing emitted twice
    final = final_of(state, segment_hyp("c d e f g.", {4: 5.0}))
    assert state.emitted == "a b. c d e f g." and final.text == " g."


def test_asr_sa6_a_segment_partly_confirmed_gives_no_window_end() -> None:
    state = WordStreamState(unfixed_words=1, window_samples=6 * MODEL_RATE)
    for n in (5, 6):
        state.on_chunk(
            segment_hyp("a b c d", {3: 4.0}), state.plan(n * MODEL_RATE, final=False)
        )
    assert state.emitted == "a b c"
    assert state.confirmed_end is None  # "d" ends the only timed segment


def test_asr_sa6_without_a_timed_confirmed_word_the_window_waits() -> None:
    """A slow engine may reach the window's edge before any decode asked for times."""
    state = WordStreamState(unfixed_words=1, window_samples=6 * MODEL_RATE)
    for n in (2, 3):  # far from the edge: no times requested
        state.on_chunk(hyp("a b c d"), state.plan(n * MODEL_RATE, final=False))
    assert state.emitted == "a b c"
    plan = state.plan(8 * MODEL_RATE, final=False)  # past the 6 s window
    assert plan.start == 0 and plan.words  # stays, and asks for times this time
    state.on_chunk(hyp("a b c d e", [1.0, 2.0, 3.0, 4.0, 5.0]), plan)
    plan = state.plan(9 * MODEL_RATE, final=False)
    assert plan.start == 4 * MODEL_RATE and state.window_text == ""  # after "d"
    assert state.emitted == "a b c d"


def confirmed(texts: list[str], **options: object) -> WordStreamState:
    """A state that confirmed ``texts`` from one chunk decode a second, untimed."""
    state = WordStreamState(unfixed_words=0, **options)  # type: ignore[arg-type]
    for n, text in enumerate(texts, start=1):
        state.on_chunk(hyp(text), state.plan(n * MODEL_RATE, final=False))
    return state


@pytest.mark.parametrize("final", [False, True])
def test_asr_sa3_no_prefix_is_forced_on_more_than_one_whisper_window(
    final: bool,
) -> None:
    """A forced prefix is read as the first window's text: Whisper on vLLM, forced with the
    words of audio past 30 s, invented a sentence more (issue 13's 40 s item)."""
    state = confirmed(["a b c", "a b c", "a b c"], window_samples=28 * MODEL_RATE)
    assert state.emitted == "a b c" and state.confirmed_end is None
    assert state.plan(30 * MODEL_RATE, final=final).prefix == (
        " a b c" if final else ""
    )
    plan = state.plan(31 * MODEL_RATE, final=final)
    assert plan.start == 0 and plan.prefix == ""  # nothing to slide to: unforced
    assert plan.words or final
    # The final after such a decode skips the confirmed pieces as SA-7 says.
    assert final_of(state, hyp("a b c d")).text == " d"


def test_asr_sa6_a_final_past_one_whisper_window_slides_first() -> None:
    state = WordStreamState(unfixed_words=0, window_samples=28 * MODEL_RATE)
    for n in (27, 28):
        plan = state.plan(n * MODEL_RATE, final=False)
        state.on_chunk(segment_hyp("a b. c", {1: 20.0}), plan)
    assert state.emitted == "a b. c" and state.confirmed_end == 20 * MODEL_RATE
    plan = state.plan(29 * MODEL_RATE, final=True)  # fits one window: the whole item
    assert plan.start == 0 and plan.prefix == " a b. c"
    plan = state.plan(31 * MODEL_RATE, final=True)
    assert plan.start == 20 * MODEL_RATE and plan.prefix == " c"
    assert final_of(state, hyp("c d.")).text == " d."
    assert state.emitted == "a b. c d."


def test_asr_sa6_unforced_decodes_near_the_edge_time_the_words_they_agree_on() -> None:
    """Near the edge a decode runs unforced; one that hears a confirmed word differently
    still gives the window the end of a confirmed word before it to slide to."""
    state = confirmed(["a b. c d", "a b. c d"], window_samples=6 * MODEL_RATE)
    assert state.emitted == "a b. c d"
    plan = state.plan(5 * MODEL_RATE, final=False)
    assert plan.prefix == "" and plan.words
    assert state.on_chunk(segment_hyp("a b. see d e", {1: 2.0, 4: 5.0}), plan) is None
    assert state.confirmed_end == 2 * MODEL_RATE  # "b." ends its segment; "see" differs
    plan = state.plan(7 * MODEL_RATE, final=False)
    assert plan.start == 2 * MODEL_RATE and state.window_text == " c d"


def test_asr_it10_logprobs_cover_each_delta_exactly() -> None:
    state = WordStreamState(unfixed_words=1, logprobs=True)
    plan = state.plan(MODEL_RATE, final=False)
    state.on_chunk(hyp("Grüß dich, Welt", [0.3, 0.6, 0.9]), plan)
    plan = state.plan(2 * MODEL_RATE, final=False)
    emitted = state.on_chunk(hyp("Grüß dich, Welt heute", [0.3, 0.6, 0.9, 1.2]), plan)
    assert emitted is not None and emitted.logprobs is not None
    assert "".join(e["token"] for e in emitted.logprobs) == emitted.text
    for entry in emitted.logprobs:
        assert entry["logprob"] == pytest.approx(math.log(0.8))
        assert entry["bytes"] == list(entry["token"].encode("utf-8"))
    final = final_of(state, hyp("Grüß dich, Welt heute.", [0.3, 0.6, 0.9, 1.2]))
    assert final.logprobs is not None
    assert "".join(e["token"] for e in final.logprobs) == final.text


def test_asr_wk7_resumed_state_never_reemits_prefix_text() -> None:
    state = WordStreamState.resumed("Hello world,", unfixed_words=0, unfixed_chunks=2)
    plan = state.plan(MODEL_RATE, final=False)
    assert plan.prefix == " Hello world,"
    state.on_chunk(hyp("Hello world, this is"), plan)
    emitted = state.on_chunk(
        hyp("Hello world, this is"), state.plan(2 * MODEL_RATE, final=False)
    )
    assert emitted is not None and emitted.text == " this is"
    assert state.emitted == "Hello world, this is"


@pytest.mark.parametrize("seed", range(20))
def test_asr_it8_random_revisions_never_retract(seed: int) -> None:
    rng = random.Random(seed)
    truth = [
        rng.choice(["alpha", "beta,", "gamma.", "delta", "42", "x-ray"])
        for _ in range(20)
    ]
    hypotheses = []
    for n in range(1, 21):
        words = truth[:n]
        if rng.random() < 0.4 and words:
            words = [*words[:-1], rng.choice(["oops", "alpha", words[-1].upper()])]
        hypotheses.append(" ".join(words))
    seen = ""
    state = WordStreamState(
        unfixed_words=rng.randint(0, 3),
        unfixed_chunks=rng.randint(0, 3),
        agree_samples=rng.choice([0, MODEL_RATE // 2, 2 * MODEL_RATE]),
    )
    for n, text in enumerate(hypotheses, start=1):
        state.on_chunk(hyp(text), state.plan(n * MODEL_RATE, final=False))
        assert state.emitted.startswith(seen)
        seen = state.emitted
    remainder = final_of(state, hyp(" ".join(truth))).text
    assert state.emitted == seen + remainder
    assert not state.emitted[:1].isspace()


def test_a_settled_hypothesis_confirms_every_word_without_agreement() -> None:
    """Issue 13: the decode of a pause confirms all its words, after the confirmed ones."""
    state = WordStreamState(unfixed_words=3)
    first = state.on_chunk(
        hyp("one two three four"), state.plan(MODEL_RATE, final=False)
    )
    assert first is None  # no previous hypothesis to agree with
    plan = state.plan(2 * MODEL_RATE, final=False)
    settled = state.on_chunk(hyp("one two three four five"), plan, settled=True)
    assert settled is not None and settled.text == "one two three four five"
    assert final_of(state, hyp("one two three four five")).text == ""


def test_a_settled_hypothesis_disagreeing_with_emitted_text_emits_nothing() -> None:
    state = WordStreamState(unfixed_words=0)
    for n in (1, 2):
        state.on_chunk(hyp("one two"), state.plan(n * MODEL_RATE, final=False))
    assert state.emitted == "one two"
    plan = state.plan(3 * MODEL_RATE, final=False)
    assert state.on_chunk(hyp("won too three"), plan, settled=True) is None
    assert state.emitted == "one two"


def test_final_option_plans_a_whole_decode_with_the_session_prompt_only() -> None:
    """Issue 34: the final decode of the ``final`` option decodes the item's whole audio as
    a whole-file transcription does: from its start, no forced prefix, no emitted text as
    prompt, even after the window moved."""
    state = WordStreamState(
        unfixed_words=0, window_samples=6 * MODEL_RATE, prompt=" Zulu "
    )
    for n in (5, 6):
        state.on_chunk(
            segment_hyp("a b. c d", {1: 2.0}), state.plan(n * MODEL_RATE, final=False)
        )
    state.plan(7 * MODEL_RATE, final=False)
    assert state.window_start == 2 * MODEL_RATE  # the window moved
    plan = state.final_plan(7 * MODEL_RATE, words=True)
    assert (plan.start, plan.end, plan.prefix, plan.prompt) == (
        0,
        7 * MODEL_RATE,
        "",
        "Zulu",
    )
    assert plan.whole and plan.final and plan.words
    deltas = WordStreamState(
        unfixed_words=0, window_samples=6 * MODEL_RATE, transcript=DELTAS
    )
    assert not deltas.final_plan(MODEL_RATE, words=True).whole


def test_final_option_transcript_is_the_final_decode_and_the_remainder_follows_the_deltas() -> (
    None
):
    state = confirmed(["one two", "one two"])
    assert state.emitted == "one two"
    plan = state.final_plan(3 * MODEL_RATE, words=False)
    final = state.on_final(hyp("won to three four."), plan)
    assert (
        final.transcript == "won to three four."
    )  # what the item said, not the preview
    assert final.remainder.text == " three four."  # after as many pieces as were shown
    assert state.emitted == "one two three four."


def test_deltas_option_transcript_is_none_the_deltas_joined() -> None:
    state = confirmed(["one two", "one two"], transcript=DELTAS)
    plan = state.final_plan(3 * MODEL_RATE, words=False)
    assert plan.prefix == " one two" and not plan.whole
    final = state.on_final(hyp("one two three"), plan)
    assert final.transcript is None and final.remainder.text == " three"


def test_only_a_whole_decode_stands_in_for_a_final_with_the_final_option() -> None:
    state = confirmed(["one two", "one two"])
    chunk = state.plan(3 * MODEL_RATE, final=False)
    whole = state.whole_plan(3 * MODEL_RATE, words=False, final=False)
    text = hyp("one two three")
    assert state.completes(text, whole) and not state.completes(text, chunk)
    exact = confirmed(["one two", "one two"], transcript=DELTAS)
    assert exact.completes(text, exact.plan(3 * MODEL_RATE, final=False))
    assert not exact.completes(text, whole)


def test_a_whole_decode_of_a_moved_window_confirms_nothing() -> None:
    state = WordStreamState(unfixed_words=0, window_samples=6 * MODEL_RATE)
    for n in (5, 6):
        state.on_chunk(
            segment_hyp("a b. c d", {1: 2.0}), state.plan(n * MODEL_RATE, final=False)
        )
    state.plan(7 * MODEL_RATE, final=False)
    whole = state.whole_plan(7 * MODEL_RATE, words=False, final=False)
    assert state.on_chunk(hyp("a b. c d e f"), whole) is None
    assert state.emitted == "a b. c d"


def test_final_option_logprobs_cover_the_transcript_exactly() -> None:
    state = confirmed(["one two", "one two"], logprobs=True)
    final = state.on_final(
        hyp("One two three."), state.final_plan(3 * MODEL_RATE, words=False)
    )
    assert final.logprobs is not None
    assert "".join(e["token"] for e in final.logprobs) == "One two three."
    assert [e["logprob"] for e in final.logprobs] == pytest.approx([math.log(0.8)] * 3)


def test_token_entries_split_pieces_at_token_boundaries_or_sum_them() -> None:
    tokens = (
        Token(" Hel", -0.5),
        Token("lo", -0.25),
        Token(",", -0.1),
        Token(" world", -1.0),
    )
    h = AsrHypothesis(text="Hello, world", tokens=tokens)
    entries = token_entries(h, 0, len(h.text), h.text)
    assert [e["token"] for e in entries] == ["Hel", "lo", ",", " world"]
    assert [e["bytes"] for e in entries] == [list(e["token"].encode()) for e in entries]
    # A delta whose first piece gained a space, after the first piece.
    entries = token_entries(h, 6, len(h.text), " world")
    assert entries == [{"token": " world", "logprob": -1.0, "bytes": list(b" world")}]
    # Tokens that do not spell the text: one entry per piece, their log probabilities summed.
    odd = AsrHypothesis(
        text="Hello, world",
        tokens=(Token(" Hello,", -0.85), Token(" wor", -0.5), Token("ld!", -0.5)),
    )
    assert token_entries(odd, 0, len(odd.text), odd.text) == []
    shifted = AsrHypothesis(
        text="Hello, world", tokens=tokens[:2] + (Token(", world", -1.1),)
    )
    # A token spanning two pieces ("," and " world"): the first piece alone gets one entry
    # of the log probabilities of the tokens that start in it.
    entries = token_entries(shifted, 0, 6, "Hello,")
    assert entries == [
        {"token": "Hello,", "logprob": pytest.approx(-1.85), "bytes": list(b"Hello,")}
    ]
