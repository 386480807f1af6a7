"""Transcripts as text, JSON or SRT subtitles."""

from __future__ import annotations

import json
from typing import Literal

from veena_cli.transcribe import Transcript

TextFormat = Literal["text", "json", "srt"]
EXTENSIONS: dict[str, TextFormat] = {".txt": "text", ".json": "json", ".srt": "srt"}


def srt_time(seconds: float) -> str:
    """``HH:MM:SS,mmm`` (SubRip)."""
    ms = int(round(seconds * 1000))
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs, ms = divmod(ms, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d},{ms:03d}"


def render(transcript: Transcript, fmt: TextFormat) -> str:
    """The whole transcript in ``fmt``, ending in a newline."""
    segments = [item.as_dict(i) for i, item in enumerate(transcript.segments)]
    if fmt == "json":
        body = {
            "text": transcript.text,
            "duration": transcript.duration,
            "segments": segments,
            "failed_items": transcript.failed_items,
        }
        return json.dumps(body, ensure_ascii=False, indent=2) + "\n"
    if fmt == "srt":
        cues = [
            f"{i + 1}\n{srt_time(s['start'])} --> {srt_time(s['end'])}\n{s['text']}\n"
            for i, s in enumerate(segments)
        ]
        return "\n".join(cues)
    return "".join(s["text"] + "\n" for s in segments)
