"""Piper's words in its own time: the model's phoneme durations, mapped to the text's words
(issue 35).

Piper's duration predictor gives every phoneme id a whole number of latent frames (its
``w_ceil``, ``hop_length`` samples each); ``piper.voice`` sums them per phoneme, with the pad
after it, for its own alignments, and so does ``phoneme_spans``. Which word a phoneme
belongs to is not in espeak-ng's output: it joins unstressed words (``of the`` →
``ʌvðə``) and splits sentences. So each word is phonemized alone too, and those phonemes,
concatenated, are aligned to the sentences' phonemes (``difflib``, stress and punctuation
left out): a phoneme belongs to the word whose own phonemes it lines up with, or to the word
before it when it lines up with none. A word lasts from its first phoneme's start to its
last phoneme's end. Pure functions: the engine runs them.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tts.worker.engines.base import Pcm, TtsEngineRequest, WordMark
from tts.worker.engines.piper_lanes import Spoken
from tts.worker.engines.word_marks import SpokenWord, speakable_words

BOS, PAD, EOS = "^", "_", "$"  # piper.const
STRESS = frozenset("ˈˌ")
Owners = list[list[int | None]]  # per sentence, per phoneme: the index of its word


def sounds(phoneme: str) -> str:
    """The letters of a phoneme that are sounds: no stress, space or punctuation."""
    return "".join(
        c for c in phoneme if unicodedata.category(c)[0] in "LM" and c not in STRESS
    )


def align(word_phonemes: Sequence[str], sentences: Sequence[Sequence[str]]) -> Owners:
    """The word (an index into ``word_phonemes``) each sentence phoneme belongs to."""
    ref_chars: list[str] = []
    ref_words: list[int] = []
    for index, phonemes in enumerate(word_phonemes):
        chars = sounds(phonemes)
        ref_chars += chars
        ref_words += [index] * len(chars)
    hyp_chars: list[str] = []
    hyp_at: list[tuple[int, int]] = []
    for s, sentence in enumerate(sentences):
        for p, phoneme in enumerate(sentence):
            for char in sounds(phoneme):
                hyp_chars.append(char)
                hyp_at.append((s, p))
    owner = _owners(ref_chars, ref_words, hyp_chars)
    owners: Owners = [[None] * len(sentence) for sentence in sentences]
    for (s, p), word in zip(hyp_at, owner, strict=True):
        if owners[s][p] is None:
            owners[s][p] = word
    return owners


def _owners(
    ref_chars: list[str], ref_words: list[int], hyp_chars: list[str]
) -> list[int | None]:
    """Each hypothesis character's word: by the aligned reference character, spread
    evenly over a replaced run; an inserted one takes the word before (or after) it."""
    owner: list[int | None] = [None] * len(hyp_chars)
    matcher = difflib.SequenceMatcher(None, ref_chars, hyp_chars, autojunk=False)
    for tag, i0, i1, j0, j1 in matcher.get_opcodes():
        if tag in ("equal", "replace"):
            for j in range(j0, j1):
                owner[j] = ref_words[i0 + (j - j0) * (i1 - i0) // (j1 - j0)]
    last = next((w for w in owner if w is not None), None)
    for j, word in enumerate(owner):
        if word is None:
            owner[j] = last
        else:
            last = word
    return owner


def phoneme_spans(
    phonemes: Sequence[str],
    id_map: Mapping[str, Sequence[int]],
    samples_per_id: npt.NDArray[np.int64],
) -> list[tuple[int, int]]:
    """Each phoneme's ``[start, end)`` in samples: its ids and the pad after it, as
    ``piper.phoneme_ids.phonemes_to_ids`` laid them out (a phoneme without ids lasts 0)."""
    edges = np.concatenate([[0], np.cumsum(samples_per_id)])
    pad = len(id_map[PAD])
    at = len(id_map[BOS]) + pad
    spans = []
    for phoneme in phonemes:
        ids = len(id_map[phoneme]) + pad if phoneme in id_map else 0
        end = min(at + ids, len(edges) - 1)
        spans.append((int(edges[at]), int(edges[end])))
        at = end
    return spans


def sentence_marks(
    words: Sequence[SpokenWord],
    owners: Sequence[int | None],
    spans: Sequence[tuple[int, int]],
    *,
    base: int,
    done: set[int],
) -> list[WordMark]:
    """The marks of the words that start in one sentence, ``base`` samples into the
    segment; words in ``done`` (begun in an earlier sentence) are left out and the new
    ones added to it."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for word, (start, end) in zip(owners, spans, strict=True):
        if word is None or word in done or end <= start:
            continue
        first.setdefault(word, start)
        last[word] = end
    done.update(first)
    return [
        WordMark(words[w].text, base + first[w], base + last[w]) for w in sorted(first)
    ]


class SentenceClock:
    """A segment's word marks, sentence by sentence, as the sentences' audio comes."""

    def __init__(
        self,
        words: Sequence[SpokenWord],
        owners: Owners,
        sentences: Sequence[Sequence[str]],
        *,
        id_map: Mapping[str, Sequence[int]],
        hop: int,
    ) -> None:
        self.words, self.owners, self.sentences = words, owners, sentences
        self.id_map, self.hop = id_map, hop
        self.sentence = -1  # the sentence whose audio came last
        self.at = 0  # samples of the segment so far
        self.done: set[int] = set()

    def take(
        self,
        samples: int,
        durations: npt.NDArray[np.float32] | None,
        *,
        starts_sentence: bool,
    ) -> list[WordMark]:
        """The marks of the sentence this audio starts (none for the rest of one), then
        move on by ``samples``."""
        marks: list[WordMark] = []
        if starts_sentence:
            self.sentence += 1
            if durations is not None and self.sentence < len(self.sentences):
                per_id = np.rint(durations).astype(np.int64) * self.hop
                phonemes = self.sentences[self.sentence]
                spans = phoneme_spans(phonemes, self.id_map, per_id)
                owners = self.owners[self.sentence]
                marks = sentence_marks(
                    self.words, owners, spans, base=self.at, done=self.done
                )
        self.at += samples
        return marks


def word_phonemes(voice: Any, word: str) -> str:
    """A word's phonemes, spoken alone by ``voice`` (a ``piper.PiperVoice``)."""
    return "".join("".join(s) for s in voice.phonemize(word))


def segment_clock(
    voice: Any,
    text: str,
    sentences: list[list[str]],
    phonemes_of: Callable[[str], str],
) -> SentenceClock:
    """The word clock of a segment: its words' own phonemes (``phonemes_of``) aligned to
    its sentences'."""
    words = speakable_words(text)
    owners = align([phonemes_of(w.text) for w in words], sentences)
    config = voice.config
    return SentenceClock(
        words, owners, sentences, id_map=config.phoneme_id_map, hop=config.hop_length
    )


def marked(spoken: Spoken, clock: SentenceClock | None, req: TtsEngineRequest) -> Pcm:
    """The run's audio, its sentence's words added to ``req.words`` first."""
    if clock is not None:
        req.words.extend(
            clock.take(
                spoken.pcm.size,
                spoken.durations,
                starts_sentence=spoken.starts_sentence,
            )
        )
    return spoken.pcm
