"""The OpenAPI components of ``POST /v1/audio/transcriptions``: the form and the answers.

What each field means is ``openai_rest.transcription_request`` (the form) and
``openai_rest.transcripts`` (the formats); docs/rest.md says it for clients.
"""

from __future__ import annotations

from django.conf import settings

from openai_rest.transcription_request import TRANSCRIPT_FORMATS
from veena_site.openapi.schemas import INTEGER, NUMBER, STRING, Schema, obj, ref

IGNORED: Schema = {"description": "Accepted and ignored."}
SECONDS: Schema = {
    **NUMBER,
    "minimum": 0,
    "description": "Seconds from the file's start.",
}
# A verbose_json segment's fields, all given (openai_rest.transcripts.verbose_segment).
SEGMENT_FIELDS = (
    "id",
    "seek",
    "start",
    "end",
    "text",
    "tokens",
    "temperature",
    "avg_logprob",
    "compression_ratio",
    "no_speech_prob",
)


def _transcription_request() -> Schema:
    """The multipart form; every field but the file is text on the wire."""
    return obj(
        ["file", "model"],
        file={"contentMediaType": "application/octet-stream"},
        model={**STRING, "description": "A name from GET /v1/models (kind asr)."},
        language=STRING,
        prompt={**STRING, "maxLength": settings.ASR_MAX_PROMPT_CHARS},
        temperature={
            **STRING,
            "description": "A number from 0 to 1; accepted and ignored (greedy).",
        },
        response_format={
            "type": "string",
            "enum": list(TRANSCRIPT_FORMATS),
            "default": "json",
        },
        stream={
            "type": "string",
            "enum": ["true", "false", "True", "False", "1", "0"],
            "description": "true: server-sent events.",
        },
        **{
            "timestamp_granularities[]": {
                "type": "array",
                "items": {"type": "string", "enum": ["word", "segment"]},
                "description": "`word` adds `words` to `verbose_json`; segments are "
                "always given.",
            },
            "include[]": {**IGNORED, "type": "array", "items": STRING},
        },
        chunking_strategy={**IGNORED, **STRING},
    )


def _duration_usage() -> Schema:
    return obj(
        ["type", "seconds"],
        type={"const": "duration"},
        seconds={"type": "integer", "minimum": 0},
    )


def _transcription() -> Schema:
    return obj(["text", "usage"], text=STRING, usage=ref("DurationUsage"))


def _segment() -> Schema:
    """One of Whisper's segments of a piece of the file (``openai_rest.transcripts``)."""
    return obj(
        list(SEGMENT_FIELDS),
        id={**INTEGER, "minimum": 0, "description": "Its index in the file."},
        seek={
            **INTEGER,
            "minimum": 0,
            "description": "Its piece's start in 10 ms frames (a piece is one window).",
        },
        start=SECONDS,
        end=SECONDS,
        text={**STRING, "description": "With Whisper's leading space."},
        tokens={
            "type": "array",
            "items": {**INTEGER, "minimum": 0},
            "description": "The decode's token ids, timestamp tokens included.",
        },
        temperature={**NUMBER, "minimum": 0, "description": "0: greedy."},
        avg_logprob={**NUMBER, "maximum": 0},
        compression_ratio={**NUMBER, "minimum": 0},
        no_speech_prob={**NUMBER, "minimum": 0, "maximum": 1},
    )


def _verbose_transcription() -> Schema:
    word = obj(["word", "start", "end"], word=STRING, start=SECONDS, end=SECONDS)
    return obj(
        ["task", "language", "duration", "text", "segments", "usage"],
        task={"const": "transcribe"},
        language={
            **STRING,
            "description": "`english` for `en`, another requested code as given, "
            "`unknown` when none was.",
        },
        duration={**NUMBER, "minimum": 0, "description": "The file's seconds."},
        text=STRING,
        segments={"type": "array", "items": _segment()},
        words={
            "type": "array",
            "items": word,
            "description": "With `timestamp_granularities[]=word`, where the engine "
            "times every word (faster-whisper; not Whisper on vLLM).",
        },
        usage=ref("DurationUsage"),
    )


def transcription_schemas() -> dict[str, Schema]:
    """The transcription components."""
    return {
        "TranscriptionRequest": _transcription_request(),
        "DurationUsage": _duration_usage(),
        "Transcription": _transcription(),
        "VerboseTranscription": _verbose_transcription(),
    }
