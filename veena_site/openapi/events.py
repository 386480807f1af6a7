"""The server-sent events of the REST calls that stream, as component schemas.

``POST /v1/audio/speech`` with ``stream_format: sse`` and ``POST /v1/audio/transcriptions``
with ``stream: true`` answer ``text/event-stream``: each event is one ``data:`` line of JSON
and no ``event:`` line, as OpenAI sends them (``openai_rest.speech.sse``). OpenAPI 3.1 has no
schema for the items of a stream (3.2's ``itemSchema``), so each such media type keeps the
body a string and names the schemas of its events in the ``x-events`` extension
(``{"oneOf": [...]}``), which the live test validates every event against.
"""

from __future__ import annotations

from typing import Any

from veena_site.openapi.schemas import INTEGER, NUMBER, STRING, Schema, obj, ref

EVENTS_EXTENSION = "x-events"


def sse_content(description: str, events: list[str]) -> dict[str, Any]:
    """The ``text/event-stream`` media type: a string body whose events are ``events``."""
    return {
        "schema": {**STRING, "description": description},
        EVENTS_EXTENSION: {"oneOf": [ref(name) for name in events]},
    }


def _transcript_delta() -> Schema:
    return obj(
        ["type", "delta"],
        type={"const": "transcript.text.delta"},
        delta={
            **STRING,
            "minLength": 1,
            "description": "One word, with the space before it (none before the "
            "file's first word).",
        },
    )


def _transcript_done() -> Schema:
    usage = {
        **ref("DurationUsage"),
        "description": "The file's audio seconds, as `json`'s usage. (The openai "
        "Python SDK types this field as token usage and parses it leniently: "
        "`usage.type` reads `duration`, the seconds are `usage.seconds`.)",
    }
    return obj(
        ["type", "text", "usage"],
        type={"const": "transcript.text.done"},
        text={**STRING, "description": "The deltas joined exactly."},
        usage=usage,
    )


def _speech_delta() -> Schema:
    return obj(
        ["type", "audio"],
        type={"const": "speech.audio.delta"},
        audio={
            **STRING,
            "contentEncoding": "base64",
            "description": "The next bytes of the `response_format` file.",
        },
    )


def _speech_words() -> Schema:
    described = (
        "Our extension (`word_timestamps`): before the delta its words start in."
    )
    return {
        **obj(
            ["type", "words"],
            type={"const": "speech.audio.words"},
            words=ref("TimedWords"),
        ),
        "description": described,
    }


def _speech_done() -> Schema:
    usage = obj(
        ["input_tokens", "output_tokens", "total_tokens"],
        input_tokens={**INTEGER, "description": "The input's characters."},
        output_tokens={**INTEGER, "const": 0},
        total_tokens=INTEGER,
        characters=INTEGER,
        audio_seconds={**NUMBER, "minimum": 0},
    )
    return obj(["type", "usage"], type={"const": "speech.audio.done"}, usage=usage)


def _stream_error() -> Schema:
    return {
        **obj(
            ["type", "error"], type={"const": "error"}, error=ref("OpenAIErrorDetail")
        ),
        "description": "A failure after the stream began; the stream ends.",
    }


def event_schemas() -> dict[str, Schema]:
    """The event components."""
    return {
        "TranscriptTextDeltaEvent": _transcript_delta(),
        "TranscriptTextDoneEvent": _transcript_done(),
        "SpeechAudioDeltaEvent": _speech_delta(),
        "SpeechAudioWordsEvent": _speech_words(),
        "SpeechAudioDoneEvent": _speech_done(),
        "StreamErrorEvent": _stream_error(),
    }
