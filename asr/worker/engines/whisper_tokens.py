"""Whisper decoder prompts and outputs as token ids, for the vLLM engine (realtime SA-9).

Pure functions over a checkpoint's tokenizer and generation config: no vLLM, no torch. The
prompt is built here rather than by vLLM's ``get_generation_prompt``, which always inserts
language and task tokens (wrong for English-only ``.en`` checkpoints, engines.md §4.4):

    [<|startofprev|> + prompt]  <|startoftranscript|>  [<|lang|><|transcribe|>]
    <|notimestamps|> or <|0.00|>  [prefix]

Outputs are split at timestamp tokens into segments, so a window can resume after its last
complete segment and the streaming window can move to a segment end (SA-6).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from asr.whisper import DecodedSegment
from asr.worker.engines.base import Token, Word
from asr.worker.engines.tokens import compression_ratio, text_tokens

if TYPE_CHECKING:
    from tokenizers import Tokenizer

SECONDS_PER_TIMESTAMP = 0.02
PROMPT_TOKENS = (
    223  # SE-13: the initial prompt keeps its last 223 tokens (openai/whisper)
)
PREFIX_TOKENS = (
    224  # a forced prefix is cut to half the context, as faster-whisper does
)
_PIECE = re.compile(r"\s*\S+")


@dataclass(frozen=True)
class WhisperVocab:
    """The special token ids and text tokenizer of one Whisper checkpoint."""

    tokenizer: Tokenizer = field(repr=False)
    eot: int
    sot: int
    sop: int
    no_timestamps: int
    transcribe: int
    languages: dict[str, int] = field(repr=False)
    multilingual: bool
    suppress: tuple[int, ...] = field(repr=False)
    begin_suppress: tuple[int, ...] = field(repr=False)
    max_length: int
    no_speech: int | None = None  # <|nospeech|> (<|nocaptions|> in older vocabularies)

    @property
    def timestamp_begin(self) -> int:
        """``<|0.00|>``: timestamp tokens follow ``<|notimestamps|>``."""
        return self.no_timestamps + 1

    @classmethod
    def from_checkpoint(cls, path: Path) -> WhisperVocab:
        """Read ``tokenizer.json``, ``config.json`` and ``generation_config.json``."""
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        config = json.loads((path / "config.json").read_text())
        generation_path = path / "generation_config.json"
        generation = (
            json.loads(generation_path.read_text()) if generation_path.exists() else {}
        )
        ids = tokenizer.get_vocab(with_added_tokens=True)
        languages = generation.get("lang_to_id") or {}
        multilingual = bool(
            generation.get("is_multilingual", config["vocab_size"] > 51864)
        )
        suppress = set(generation.get("suppress_tokens") or [])
        return cls(
            tokenizer=tokenizer,
            eot=ids["<|endoftext|>"],
            sot=ids["<|startoftranscript|>"],
            sop=ids["<|startofprev|>"],
            no_timestamps=ids["<|notimestamps|>"],
            transcribe=ids["<|transcribe|>"],
            languages={k.strip("<|>"): v for k, v in languages.items()},
            multilingual=multilingual,
            suppress=tuple(sorted(suppress)),
            begin_suppress=tuple(generation.get("begin_suppress_tokens") or []),
            max_length=int(config.get("max_target_positions", 448)),
            no_speech=ids.get("<|nospeech|>", ids.get("<|nocaptions|>")),
        )

    def encode(self, text: str) -> list[int]:
        """Text tokens of ``text`` (no special tokens)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids``, special and timestamp tokens left out."""
        return str(self.tokenizer.decode([i for i in ids if i < self.eot]))

    def rules(self, ids: list[int], *, timestamps: bool) -> dict[str, object]:
        """``WhisperRules`` (``whisper_rules``) for a request with decoder prompt ``ids``."""
        mode = self.timestamp_begin if timestamps else self.no_timestamps
        return {
            "eot": self.eot,
            "timestamp_begin": self.timestamp_begin,
            "suppress": list(self.suppress),
            "begin_suppress": list(self.begin_suppress),
            "timestamps": timestamps,
            "sample_begin": len(ids) - 1 - ids[::-1].index(mode),
        }

    def decoder_prompt(
        self, *, prompt: str, language: str | None, prefix: str, timestamps: bool
    ) -> list[int]:
        """The decoder prompt of SA-9; ``language`` is used by multilingual models only."""
        ids: list[int] = []
        if prompt.strip():
            ids = [self.sop, *self.encode(" " + prompt.strip())[-PROMPT_TOKENS:]]
        ids.append(self.sot)
        if self.multilingual:
            ids += [self.languages[language or "en"], self.transcribe]
        ids.append(self.timestamp_begin if timestamps else self.no_timestamps)
        if prefix.strip():
            ids += self.encode(" " + prefix.strip())[:PREFIX_TOKENS]
        return ids


@dataclass(frozen=True)
class TokenSegment:
    """Text tokens between timestamps; ``end`` is None when no timestamp closed it."""

    start: float
    end: float | None
    tokens: tuple[int, ...]
    logprobs: tuple[float, ...]


def split_segments(
    ids: list[int], logprobs: list[float], vocab: WhisperVocab, *, duration: float
) -> list[TokenSegment]:
    """Segments of one window's output (its prompt ended with ``<|0.00|>``).

    Greedy decoding without Whisper's timestamp rules can emit times that go backwards or
    past the window; they are clamped, so segment times never decrease.
    """
    segments: list[TokenSegment] = []
    start = 0.0
    tokens: list[int] = []
    probs: list[float] = []
    for i, token in enumerate(ids):
        if token == vocab.eot:
            break
        if token >= vocab.timestamp_begin:
            at = min((token - vocab.timestamp_begin) * SECONDS_PER_TIMESTAMP, duration)
            at = max(at, start)
            if tokens:
                segments.append(TokenSegment(start, at, tuple(tokens), tuple(probs)))
                tokens, probs = [], []
            start = at
        elif token < vocab.eot:
            tokens.append(token)
            probs.append(logprobs[i] if i < len(logprobs) else 0.0)
    if tokens:
        segments.append(TokenSegment(start, None, tuple(tokens), tuple(probs)))
    return segments


@dataclass(frozen=True)
class DecodedWindow:
    """One decoded window: kept segments, seconds to the next window, token counts, and
    Whisper's confidence of the window (with ``segments`` asked for)."""

    segments: list[TokenSegment]
    advance: float
    prompt_tokens: int
    text_tokens: int
    duration: float = 0.0
    avg_logprob: float = 0.0
    no_speech_prob: float = 0.0

    def decoded(self, vocab: WhisperVocab, offset: float) -> list[DecodedSegment]:
        """The kept segments as ``DecodedSegment`` (times from ``offset`` seconds)."""
        text = "".join(vocab.decode(list(s.tokens)) for s in self.segments)
        return [
            DecodedSegment(
                start=offset + s.start,
                end=offset + (self.duration if s.end is None else s.end),
                text=vocab.decode(list(s.tokens)),
                tokens=s.tokens,
                avg_logprob=self.avg_logprob,
                no_speech_prob=self.no_speech_prob,
                compression_ratio=compression_ratio(text),
            )
            for s in self.segments
        ]


def keep_until_resume(
    segments: list[TokenSegment], window: float
) -> tuple[list[TokenSegment], float]:
    """A non-final window's kept segments and where the next window starts (seconds).

    The next window starts at the end of the last complete segment, and a segment the output
    left open is decoded again there. Whisper itself skips to the window's end when the last
    segment is closed; the model's claim that nothing follows is not trusted here (a word
    straddling the 30 s cut was lost that way).
    """
    complete = [s for s in segments if s.end is not None]
    if complete and complete[-1].end:
        return complete, float(complete[-1].end)
    return segments, window


@dataclass
class TimedText:
    """Text assembled window by window, with the time and probability of each piece."""

    vocab: WhisperVocab
    text: str = ""  # the forced prefix (with its leading space), then decoded text
    prefix_chars: int = 0
    # Character offset in ``text`` where a segment ended, and its time in seconds.
    boundaries: list[tuple[int, float]] = field(default_factory=list)
    # Character offset in ``text`` where a token's text starts, and its log probability.
    token_starts: list[tuple[int, float]] = field(default_factory=list)
    # The decoded (not forced) text tokens, with their texts (realtime IT-10).
    tokens: list[Token] = field(default_factory=list)

    @classmethod
    def with_prefix(cls, vocab: WhisperVocab, prefix: str) -> TimedText:
        """A transcript that begins with the forced ``prefix``."""
        text = " " + prefix.strip() if prefix.strip() else ""
        return cls(vocab=vocab, text=text, prefix_chars=len(text))

    def add(self, segments: list[TokenSegment], offset: float) -> None:
        """Append a window's segments; their times count from ``offset`` seconds."""
        for segment in segments:
            at = len(self.text)
            for token, logprob in zip(segment.tokens, segment.logprobs, strict=True):
                self.token_starts.append((at, logprob))
                at += len(self.vocab.decode([token]))
            self.text += self.vocab.decode(list(segment.tokens))
            self.tokens += text_tokens(
                segment.tokens, segment.logprobs, self.vocab.decode
            )
            if segment.end is not None:
                self.boundaries.append((len(self.text), offset + segment.end))

    def hypothesis_text(self) -> str:
        """The whole text, forced prefix included, without surrounding whitespace."""
        return self.text.strip()

    def words(self) -> tuple[Word, ...]:
        """One word per piece after the prefix: segment-end times and probabilities."""
        lead = len(self.text) - len(self.text.lstrip())
        spans = [
            (m.start() + lead, m.end() + lead, m.group())
            for m in _PIECE.finditer(self.hypothesis_text())
        ]
        ends: dict[int, float] = {}
        for offset, at in self.boundaries:
            last = max((i for i, s in enumerate(spans) if s[1] <= offset), default=None)
            if last is not None:
                ends.setdefault(last, at)
        words = []
        for i, (begin, end, piece) in enumerate(spans):
            if end <= self.prefix_chars:
                continue
            begin = (
                0 if i == 0 else begin
            )  # the text's leading space starts a token too
            logprob = sum(lp for at, lp in self.token_starts if begin <= at < end)
            words.append(
                Word(
                    text=piece,
                    end=ends.get(i),
                    probability=math.exp(min(0.0, logprob)),
                )
            )
        return tuple(words)
