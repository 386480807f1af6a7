"""Confirmed-word streaming of one item (realtime §14, SA-1 to SA-7): pure state, no I/O.

A chunk decode gives a hypothesis ``H`` of the item's audio from the window start ``W``. A piece
(a word with its leading whitespace, SA-4) is confirmed when it follows the already confirmed
window text ``Ew``, is not among the last ``unfixed_words`` pieces, and an earlier hypothesis
agrees with it at the same position (SA-5): the latest one of audio that ended at least
``agree_samples`` before this one's (issue 13; 0: the previous hypothesis). At a short
re-decode cadence two consecutive hypotheses both end inside the word being spoken and agree
on a guess; one of audio ``agree_samples`` shorter agreeing means the word was heard whole that
long ago. With ``agree_followed`` set, a piece is also confirmed when the previous hypothesis,
however close, agrees with it and this one holds that many more pieces after it: a word
followed by another was heard whole, where a hypothesis' last word may be a guess at a word cut
off. Until the item holds ``followed_both_samples``, the previous one must hold as many after
it too: the first second or two of short-context decodes mishear most ("the like house").
Confirmed text is appended to ``E`` and never retracted; the final decode's
remainder ``R`` completes it (SA-7). Which text is the item's transcript is the session's
``transcript`` option (issue 34): ``final`` (the default) is a decode of the item's whole audio
as a whole-file transcription decodes it (no forced prefix, the session prompt only), so the
deltas are a live preview the transcript replaces; ``deltas`` keeps ``E + R``, the deltas
joined exactly, with the final decode forced to continue ``Ew``.
"""

from __future__ import annotations

import unicodedata
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from asr.messages import DELTAS, FINAL
from asr.whisper import MODEL_RATE, WINDOW_SAMPLES
from asr.worker.engines.base import AsrHypothesis
from asr.worker.hypothesis import LogProb, pieces, token_entries

PROMPT_CONTEXT_CHARS = 200  # SA-3: emitted text before the window, as prompt context


def normalized(piece: str) -> str:
    """A piece compared for agreement: casefolded, without whitespace or punctuation."""
    folded = piece.strip().casefold()
    return "".join(c for c in folded if not unicodedata.category(c).startswith("P"))


def starts_with(hyp: list[str], done: list[str]) -> bool:
    """True when ``hyp`` begins with the pieces ``done`` (normalised)."""
    return _agreeing(hyp, done) == len(done)


def _agreeing(hyp: list[str], done: list[str]) -> int:
    """How many leading pieces of ``hyp`` and ``done`` agree (normalised)."""
    count = 0
    for a, b in zip(hyp, done, strict=False):
        if normalized(a) != normalized(b):
            break
        count += 1
    return count


def _piece_words(hyp: AsrHypothesis) -> list[int | None] | None:
    """Word index of every piece of ``hyp.text``; words may omit a leading prefix."""
    if not hyp.words:
        return None
    owners: list[int | None] = []
    for index, word in enumerate(hyp.words):
        owners.extend([index] * max(1, len(pieces(word.text))))
    missing = len(pieces(hyp.text)) - len(owners)
    if missing < 0:
        return None
    return [None] * missing + owners


@dataclass(frozen=True)
class DecodePlan:
    """What to decode next: audio from ``start``, prompt, forced prefix, word times."""

    start: int
    end: int  # samples of the item the decode covers
    prompt: str = field(repr=False)
    prefix: str = field(repr=False)
    words: bool
    final: bool
    # A decode of the item's whole audio without a forced prefix: the transcript of the
    # ``final`` option, which a decode after the speech may stand in for.
    whole: bool = False


@dataclass(frozen=True)
class Emission:
    """Text to send for an item (a confirmed delta or the final remainder)."""

    text: str = field(repr=False)
    logprobs: list[LogProb] | None = None


@dataclass(frozen=True)
class FinalText:
    """What the final decode gives: the last delta (the remainder ``R``) and, with the
    ``final`` option, the transcript of record and its logprobs (None: ``E + R``)."""

    remainder: Emission
    transcript: str | None = field(default=None, repr=False)
    logprobs: list[LogProb] | None = field(default=None, repr=False)


@dataclass
class WordStreamState:
    """SA-1 state of one item in the worker."""

    prompt: str = ""
    emitted: str = ""  # E
    window_start: int = 0  # W, samples
    window_text: str = ""  # Ew, the part of E decoded from audio >= W
    # Earlier hypotheses of the window (Hprev and before) as (end sample, text), oldest first.
    history: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=16))
    chunks: int = 0  # k
    confirmed_end: int | None = None  # end sample of the last timed confirmed word
    confirmed_pieces: int = 0  # pieces of E up to that word
    chunk_samples: int = MODEL_RATE
    window_samples: int = 28 * MODEL_RATE
    unfixed_words: int = 3
    unfixed_chunks: int = 2
    agree_samples: int = 0
    agree_followed: int = 0
    followed_both_samples: int = 0
    logprobs: bool = False
    transcript: str = FINAL  # TRANSCRIPT_SOURCES

    @classmethod
    def resumed(cls, prefix_text: str, **options: Any) -> WordStreamState:
        """State for an item whose ``prefix_text`` was already emitted (WK-7 failover)."""
        state = cls(emitted=prefix_text, window_text=prefix_text, **options)
        if prefix_text:
            state.chunks = state.unfixed_chunks
        return state

    def plan(self, total: int, *, final: bool) -> DecodePlan:
        """The next decode of an item holding ``total`` samples (SA-3, SA-6, SA-7).

        A prefix is forced only on a decode of one Whisper window: the model reads a forced
        prefix as the first window's text, and text of audio past the window's end makes it
        invent more (a 40 s item's fourth sentence came out twice). So a final slides too
        when its audio would not fit one window, and near the window's edge chunk decodes
        run unforced with times: Whisper's own segments, where a forced decode times only
        what follows the prefix, give the window a confirmed word to slide to.
        """
        if total - self.window_start > (
            WINDOW_SAMPLES if final else min(self.window_samples, WINDOW_SAMPLES)
        ):
            self._slide(total)
        span = total - self.window_start
        before = self.emitted[: len(self.emitted) - len(self.window_text)]
        context = before[-PROMPT_CONTEXT_CHARS:].strip()
        prompt = " ".join(p for p in (self.prompt.strip(), context) if p)
        near_edge = span > self.window_samples - 2 * self.chunk_samples
        force = span <= WINDOW_SAMPLES and (
            final or (self.chunks >= self.unfixed_chunks and not near_edge)
        )
        prefix = " " + self.window_text.lstrip() if force and self.window_text else ""
        return DecodePlan(
            start=self.window_start,
            end=total,
            prompt=prompt,
            prefix=prefix,
            words=self.logprobs or near_edge,
            final=final,
        )

    @property
    def final_is_whole(self) -> bool:
        """Whether the final decode is a whole decode (the ``final`` option)."""
        return self.transcript != DELTAS

    def whole_plan(self, total: int, *, words: bool, final: bool) -> DecodePlan:
        """A decode of the item's ``total`` samples as a whole-file transcription decodes
        them: from the start, the session prompt only, no prefix (issue 34)."""
        return DecodePlan(
            start=0,
            end=total,
            prompt=self.prompt.strip(),
            prefix="",
            words=words,
            final=final,
            whole=True,
        )

    def final_plan(self, total: int, *, words: bool) -> DecodePlan:
        """The final decode of the item's ``total`` samples for its ``transcript`` option."""
        if self.final_is_whole:
            return self.whole_plan(total, words=words, final=True)
        return self.plan(total, final=True)

    def on_chunk(
        self, hyp: AsrHypothesis, plan: DecodePlan, *, settled: bool = False
    ) -> Emission | None:
        """Confirm what two hypotheses agree on (SA-5); None when nothing new.

        A ``settled`` hypothesis is of audio that ends in a pause after the speech (issue 13):
        no later audio can change its words, so all of them are confirmed at once. A whole
        decode of an item whose window moved confirms nothing (its text is not the window's).
        """
        if plan.start != self.window_start:
            self.chunks += 1
            return None
        hyp_pieces = pieces(hyp.text)
        done = pieces(self.window_text)
        self.chunks += 1
        earlier = pieces(self._earlier(plan.end))
        last = pieces(self.history[-1][1]) if self.history else []
        self.history.append((plan.end, hyp.text))
        if not starts_with(hyp_pieces, done):
            # An unforced decode (near the window's edge) that heard a confirmed word
            # differently still times the confirmed words before it.
            self._note_confirmed_end(hyp, plan, _agreeing(hyp_pieces, done))
            return None
        if settled:
            stop = len(hyp_pieces)
        else:
            stop = max(len(done), len(hyp_pieces) - self.unfixed_words)
        count = 0
        for index in range(len(done), stop):
            if not settled and not self._agreed(
                hyp_pieces, index, earlier, last, plan.end
            ):
                break
            count += 1
        self._note_confirmed_end(hyp, plan, len(done) + count)
        if not count:
            return None
        return self._emit(hyp, hyp_pieces, len(done), len(done) + count)

    def _agreed(
        self, hyp: list[str], index: int, earlier: list[str], last: list[str], end: int
    ) -> bool:
        """Whether piece ``index`` of ``hyp`` (of the item's audio up to ``end``) is
        confirmed (SA-5): the ``earlier`` hypothesis agrees with it, or the ``last`` one does
        with ``agree_followed`` pieces after it in ``hyp`` (and in ``last`` too before
        ``followed_both_samples``)."""

        def same(other: list[str]) -> bool:
            return index < len(other) and normalized(other[index]) == normalized(
                hyp[index]
            )

        if same(earlier):
            return True
        previous = self.agree_followed if end < self.followed_both_samples else 0
        return (
            self.agree_followed > 0
            and index + self.agree_followed < len(hyp)
            and index + previous < len(last)
            and same(last)
        )

    def _earlier(self, end: int) -> str:
        """The hypothesis a new one of audio up to ``end`` is compared with (SA-5): the latest
        of audio ``agree_samples`` shorter (0: the previous one); "" when none is kept."""
        for seen_end, text in reversed(self.history):
            if seen_end <= end - self.agree_samples:
                return text
        return ""

    def completes(self, hyp: AsrHypothesis, plan: DecodePlan) -> bool:
        """Whether a chunk hypothesis can stand in for the final decode (issue 13).

        With the ``final`` option it must be a whole decode (or one planned as it would
        be: from the start, unforced, the session prompt only). With ``deltas`` it must be of
        the current window, and begin with everything confirmed from it, so that its
        remainder after ``Ew`` completes ``E`` exactly as a final's would (SA-7).
        """
        if self.final_is_whole:
            return plan.whole or (
                plan.start == 0
                and not plan.prefix
                and plan.prompt == self.prompt.strip()
            )
        return (
            not plan.whole
            and plan.start == self.window_start
            and starts_with(pieces(hyp.text), pieces(self.window_text))
        )

    def on_final(self, hyp: AsrHypothesis, plan: DecodePlan) -> FinalText:
        """The remainder ``R`` of the final hypothesis after what the deltas showed (SA-7),
        and with the ``final`` option the hypothesis as the transcript (issue 34).

        ``R`` follows the pieces of ``Ew`` (of ``E`` for a whole decode); where the final
        hypothesis heard them differently, ``R`` starts after as many of its pieces.
        """
        hyp_pieces = pieces(hyp.text)
        shown = self.emitted if plan.whole else self.window_text
        remainder = self._emit(hyp, hyp_pieces, len(pieces(shown)), len(hyp_pieces))
        if not self.final_is_whole:
            return FinalText(remainder)
        entries = (
            token_entries(hyp, 0, len(hyp.text), hyp.text) if self.logprobs else None
        )
        return FinalText(remainder, hyp.text, entries)

    def _emit(
        self, hyp: AsrHypothesis, hyp_pieces: list[str], first: int, stop: int
    ) -> Emission:
        chosen = hyp_pieces[first:stop]
        if chosen:
            chosen[0] = self._joinable(chosen[0])
        text = "".join(chosen)
        self.emitted += text
        self.window_text += text
        if not self.logprobs or not text:
            return Emission(text=text)
        begin = len("".join(hyp_pieces[:first]))
        end = begin + len("".join(hyp_pieces[first:stop]))
        return Emission(text=text, logprobs=token_entries(hyp, begin, end, text))

    def _joinable(self, piece: str) -> str:
        """The first new piece: no leading space at item start, a space after text."""
        if not self.emitted:
            return piece.lstrip()
        if piece[:1].isspace() or self.emitted[-1:].isspace():
            return piece
        return " " + piece

    def _note_confirmed_end(
        self, hyp: AsrHypothesis, plan: DecodePlan, confirmed: int
    ) -> None:
        """Remember where the window may move: the end of the last timed confirmed word.

        A word may span several pieces, and only some words may have an end (vLLM times
        segments): the window moves to the end of the last confirmed word that has one, and
        the confirmed pieces after it become the new window's text (SA-6).
        """
        owners = _piece_words(hyp)
        if not confirmed or owners is None or confirmed > len(owners):
            return
        for index in range(confirmed - 1, -1, -1):
            word = owners[index]
            last_piece = index + 1 == len(owners) or owners[index + 1] != word
            end_s = None if word is None else hyp.words[word].end
            if last_piece and end_s is not None:
                end = plan.start + int(end_s * MODEL_RATE)
                if end >= (self.confirmed_end or 0):
                    before = self.emitted[: len(self.emitted) - len(self.window_text)]
                    self.confirmed_end = end
                    self.confirmed_pieces = len(pieces(before)) + index + 1
                return

    def _slide(self, total: int) -> None:
        """Move ``W`` to the end of the last timed confirmed word (SA-6).

        ``Ew`` becomes the confirmed text after that point. Without such a word in the window
        ``W`` stays, and this decode asks for times: moving ``W`` anywhere else would decode
        again audio whose words are already emitted (or skip audio not yet transcribed), and
        both engines transcribe audio longer than one Whisper window.
        """
        end = self.confirmed_end
        if end is None or end <= self.window_start or end > total:
            return
        self.window_start = end
        self.window_text = "".join(pieces(self.emitted)[self.confirmed_pieces :])
        self.history.clear()
