"""A file's transcript in each ``response_format``, and its stream events.

One segment per piece the file was cut into (``openai_rest.split``), with that piece's times;
``verbose_json`` has ``words`` when they were asked for and the engine timed every one
(faster-whisper does; Whisper on vLLM times segments only). ``usage`` counts the file's audio seconds (``duration``),
as whisper-1 does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from openai_rest.split import Piece
from openai_rest.transcription_request import TranscriptFormat

LANGUAGE_NAMES = {"en": "english"}


@dataclass(frozen=True)
class Segment:
    """One piece's text and times."""

    start: float
    end: float
    text: str = field(repr=False)
    tokens: int = 0
    words: tuple[dict[str, Any], ...] | None = field(default=None, repr=False)


def segment_of(
    piece: Piece,
    text: str,
    tokens: int,
    words: list[dict[str, Any]] | None = None,
) -> Segment:
    """The segment of a transcribed piece; word times move from the piece to the file."""
    timed = None
    if words is not None:
        timed = tuple(
            {
                "word": w["word"],
                "start": round(piece.start_s + w["start"], 3),
                "end": round(piece.start_s + w["end"], 3),
            }
            for w in words
        )
    return Segment(
        start=piece.start_s,
        end=piece.end_s,
        text=text.strip(),
        tokens=tokens,
        words=timed,
    )


def delta_text(index: int, text: str) -> str:
    """The text a piece adds to the transcript: a space before all but the first."""
    text = text.strip()
    return (" " + text if index else text) if text else ""


def full_text(segments: list[Segment]) -> str:
    """The whole transcript."""
    return " ".join(s.text for s in segments if s.text)


def usage(duration_s: float) -> dict[str, Any]:
    """Whisper-1's usage: the audio's seconds, rounded up."""
    return {"type": "duration", "seconds": math.ceil(duration_s)}


def render(
    fmt: TranscriptFormat,
    segments: list[Segment],
    *,
    duration_s: float,
    language: str | None,
    words: bool = False,
) -> tuple[str | dict[str, Any], str]:
    """The body (a JSON object, or text) and its content type."""
    text = full_text(segments)
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
        "language": LANGUAGE_NAMES.get(language or "", language or "unknown"),
        "duration": round(duration_s, 3),
        "text": text,
        "segments": [verbose_segment(i, s) for i, s in enumerate(segments)],
        "usage": usage(duration_s),
    }
    if words and all(s.words is not None for s in segments):
        verbose["words"] = [w for s in segments for w in s.words or ()]
    return verbose, "application/json"


def verbose_segment(index: int, segment: Segment) -> dict[str, Any]:
    """A ``verbose_json`` segment; the fields Whisper has and we do not are neutral."""
    return {
        "id": index,
        "seek": round(segment.start * 100),
        "start": round(segment.start, 3),
        "end": round(segment.end, 3),
        "text": " " + segment.text,
        "tokens": [],
        "temperature": 0.0,
        "avg_logprob": 0.0,
        "compression_ratio": 1.0,
        "no_speech_prob": 0.0,
    }


def _clock(seconds: float, sep: str) -> str:
    ms = round(seconds * 1000)
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def srt(segments: list[Segment]) -> str:
    """SubRip cues, numbered from 1."""
    cues = [
        f"{n}\n{_clock(s.start, ',')} --> {_clock(s.end, ',')}\n{s.text}\n"
        for n, s in enumerate((s for s in segments if s.text), start=1)
    ]
    return "\n".join(cues) + ("\n" if cues else "")


def vtt(segments: list[Segment]) -> str:
    """WebVTT cues."""
    cues = [
        f"{_clock(s.start, '.')} --> {_clock(s.end, '.')}\n{s.text}\n"
        for s in segments
        if s.text
    ]
    return "WEBVTT\n\n" + "\n".join(cues)
