"""A file's transcript in each ``response_format``, and its stream events.

The file was cut into pieces (``openai_rest.split``), each decoded as one item by the final
decode (``asr.worker.engines.base.final_request``, with timestamps). Its segments are Whisper's, with
their times moved from the piece to the file and the decode's own ``tokens``, ``avg_logprob``,
``no_speech_prob``, ``compression_ratio`` and ``temperature``; ``seek`` is the piece's start
in 10 ms frames (a piece is at most 28 s, one Whisper window). ``verbose_json`` has ``words``
when they were asked for and the engine timed every one (faster-whisper does; Whisper on vLLM
times segments only). ``usage`` counts the file's audio seconds (``duration``), as whisper-1
does. A stream sends one delta a word, each piece's words as its final decode ends.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from asr.languages import WHISPER_LANGUAGES
from asr.whisper import DecodedSegment
from openai_rest.split import Piece
from openai_rest.transcription_request import TranscriptFormat

FRAMES_PER_S = 100  # Whisper's seek unit: mel frames of 10 ms
_WORD = re.compile(r"\s*\S+")


@dataclass(frozen=True)
class PieceTranscript:
    """A piece's transcript, its Whisper segments and timed words (file seconds),
    ``seek``, the piece's start in Whisper's 10 ms frames, and the ``language`` the worker
    decoded it in (None when the worker did not say)."""

    text: str = field(repr=False)
    segments: tuple[DecodedSegment, ...] = ()
    words: tuple[dict[str, Any], ...] | None = field(default=None, repr=False)
    seek: int = 0
    language: str | None = None


def piece_transcript(
    piece: Piece,
    text: str,
    segments: list[dict[str, Any]] | None,
    words: list[dict[str, Any]] | None = None,
    language: str | None = None,
) -> PieceTranscript:
    """A transcribed piece; segment and word times move from the piece to the file (and
    stay inside the piece)."""
    return PieceTranscript(
        text=text.strip(),
        segments=tuple(
            DecodedSegment(
                **{
                    **_placed(piece, s),
                    "text": s["text"].strip(),
                    "tokens": tuple(s["tokens"]),
                }
            )
            for s in segments or ()
            if s["text"].strip()
        ),
        words=None if words is None else tuple(_placed(piece, w) for w in words),
        seek=round(piece.start_s * FRAMES_PER_S),
        language=language,
    )


def _placed(piece: Piece, timed: dict[str, Any]) -> dict[str, Any]:
    """``timed`` (with ``start`` and ``end`` in piece seconds) in file seconds."""

    def moved(seconds: float) -> float:
        return round(min(piece.start_s + seconds, piece.end_s), 3)

    return {**timed, "start": moved(timed["start"]), "end": moved(timed["end"])}


def word_deltas(index: int, text: str) -> list[str]:
    """The stream deltas of piece ``index``: one a word, each with the space before it
    (none before the file's first word)."""
    words = _WORD.findall(text.strip())
    if words and index:
        words[0] = " " + words[0]
    return words


def full_text(pieces: list[PieceTranscript]) -> str:
    """The whole transcript."""
    return " ".join(p.text for p in pieces if p.text)


def language_name(pieces: list[PieceTranscript], requested: str | None) -> str:
    """``verbose_json``'s language: the name of the one the first piece was decoded in
    (Whisper detects it on the file's first 30 s), else of the request's; "unknown" when
    neither is known (a worker that does not say, and no language asked for)."""
    code = next((p.language for p in pieces if p.language), None) or requested
    if not code:
        return "unknown"
    return WHISPER_LANGUAGES.get(code, code)


def usage(duration_s: float) -> dict[str, Any]:
    """Whisper-1's usage: the audio's seconds, rounded up."""
    return {"type": "duration", "seconds": math.ceil(duration_s)}


def render(
    fmt: TranscriptFormat,
    pieces: list[PieceTranscript],
    *,
    duration_s: float,
    language: str | None,
    words: bool = False,
) -> tuple[str | dict[str, Any], str]:
    """The body (a JSON object, or text) and its content type."""
    text = full_text(pieces)
    segments = [s for p in pieces for s in p.segments]
    seeks = [p.seek for p in pieces for _ in p.segments]
    if fmt == "json":
        return {"text": text, "usage": usage(duration_s)}, "application/json"
    if fmt == "text":
        return text + "\n", "text/plain; charset=utf-8"
    if fmt == "srt":
        return srt(segments), "text/plain; charset=utf-8"
    if fmt == "vtt":
        return vtt(segments), "text/vtt; charset=utf-8"
    verbose: dict[str, Any] = {
        "task": "transcribe",
        "language": language_name(pieces, language),
        "duration": round(duration_s, 3),
        "text": text,
        "segments": [
            verbose_segment(i, s, seek)
            for i, (s, seek) in enumerate(zip(segments, seeks, strict=True))
        ],
        "usage": usage(duration_s),
    }
    if words and all(p.words is not None for p in pieces):
        verbose["words"] = [w for p in pieces for w in p.words or ()]
    return verbose, "application/json"


def verbose_segment(index: int, segment: DecodedSegment, seek: int) -> dict[str, Any]:
    """A ``verbose_json`` segment, as Whisper's ``transcribe`` reports it."""
    return {
        "id": index,
        "seek": seek,
        "start": segment.start,
        "end": segment.end,
        "text": " " + segment.text,
        "tokens": list(segment.tokens),
        "temperature": segment.temperature,
        "avg_logprob": round(segment.avg_logprob, 6),
        "compression_ratio": round(segment.compression_ratio, 6),
        "no_speech_prob": round(segment.no_speech_prob, 6),
    }


def _clock(seconds: float, sep: str) -> str:
    ms = round(seconds * 1000)
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def srt(segments: list[DecodedSegment]) -> str:
    """SubRip cues, numbered from 1."""
    cues = [
        f"{n}\n{_clock(s.start, ',')} --> {_clock(s.end, ',')}\n{s.text}\n"
        for n, s in enumerate((s for s in segments if s.text), start=1)
    ]
    return "\n".join(cues) + ("\n" if cues else "")


def vtt(segments: list[DecodedSegment]) -> str:
    """WebVTT cues."""
    cues = [
        f"{_clock(s.start, '.')} --> {_clock(s.end, '.')}\n{s.text}\n"
        for s in segments
        if s.text
    ]
    return "WEBVTT\n\n" + "\n".join(cues)
