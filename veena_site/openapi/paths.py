"""The OpenAPI ``paths``: every REST endpoint, its parameters, bodies and answers."""

from __future__ import annotations

from typing import Any

from veena_site.openapi.events import sse_content
from veena_site.openapi.schemas import INTEGER, STRING, Schema, ref, usage_limits

BINARY: Schema = {"contentMediaType": "application/octet-stream"}
# response_format → the Content-Type of POST /v1/audio/speech (openai_rest.encode).
SPEECH_TYPES = ("audio/mpeg", "audio/ogg", "audio/aac", "audio/flac", "audio/wav")
TTS_TYPES = ("audio/wav", "audio/pcm", "audio/basic")
RETRY_AFTER = {"retry-after": {"schema": STRING, "description": "Whole seconds."}}


def json_content(schema: Schema) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def error_answers(schema: str, statuses: dict[int, str]) -> dict[str, Any]:
    """Error answers in one envelope; 429 and 503 carry ``retry-after``."""
    out = {}
    for status, text in statuses.items():
        answer: dict[str, Any] = {
            "description": text,
            "content": json_content(ref(schema)),
        }
        if status in (429, 503):
            answer["headers"] = RETRY_AFTER
        out[str(status)] = answer
    return out


def json_answer(description: str, schema: str) -> dict[str, Any]:
    """An answer whose JSON body is the component ``schema``."""
    return {"description": description, "content": json_content(ref(schema))}


def operation(
    method: str,
    operation_id: str,
    tag: str,
    summary: str,
    ok: dict[str, Any],
    errors: dict[str, Any],
    **fields: Any,
) -> dict[str, Any]:
    """One operation of a path: ``fields`` (``parameters``, ``requestBody``, …) stand
    between the summary and the answers, ``ok`` is the 200 answer, ``errors`` the rest."""
    return {
        method: {
            "operationId": operation_id,
            "tags": [tag],
            "summary": summary,
            **fields,
            "responses": {"200": ok, **errors},
        }
    }


OPENAI_ERRORS = {
    400: "Invalid request: `param` names the field.",
    401: "Missing or invalid API key.",
    403: "Origin or endpoint not allowed for this key.",
    429: "Rate limit, concurrency or quota (`insufficient_quota`).",
    500: "Server error.",
    503: "Overloaded, or the model is not loaded.",
    504: "The job outlived its time limit.",
}


def _speech() -> dict[str, Any]:
    audio = {t: {"schema": BINARY} for t in SPEECH_TYPES}
    audio["audio/pcm"] = {"schema": BINARY}
    events = (
        "`speech.audio.delta` events, then `speech.audio.done` (or `error`). With "
        "`word_timestamps` (our extension), a `speech.audio.words` event (`{type, "
        "words: [{word, start_ms, end_ms}]}`, ms from the start of the audio) comes "
        "before the delta its words start in."
    )
    audio["text/event-stream"] = sse_content(
        events,
        [
            "SpeechAudioDeltaEvent",
            "SpeechAudioWordsEvent",
            "SpeechAudioDoneEvent",
            "StreamErrorEvent",
        ],
    )
    return operation(
        "post",
        "createSpeech",
        "OpenAI",
        "Text to speech (OpenAI's speech endpoint)",
        {"description": "Audio, streamed as it is made.", "content": audio},
        error_answers("OpenAIError", OPENAI_ERRORS),
        requestBody={"required": True, "content": json_content(ref("SpeechRequest"))},
    )


TRANSCRIPT_EVENTS = (
    "With `stream=true`: a `transcript.text.delta` event per word (each piece's words as "
    "soon as its decode is done, in file order), then `transcript.text.done` with the "
    "whole text (the deltas joined exactly) and the file's duration usage (or `error`)."
)


def _transcriptions() -> dict[str, Any]:
    form = {"multipart/form-data": {"schema": ref("TranscriptionRequest")}}
    body = {"anyOf": [ref("Transcription"), ref("VerboseTranscription")]}
    events = ["TranscriptTextDeltaEvent", "TranscriptTextDoneEvent", "StreamErrorEvent"]
    content = {
        **json_content(body),
        "text/plain": {"schema": STRING},
        "text/vtt": {"schema": STRING},
        "text/event-stream": sse_content(TRANSCRIPT_EVENTS, events),
    }
    return operation(
        "post",
        "createTranscription",
        "OpenAI",
        "Transcribe an audio file",
        {
            "description": "The transcript in `response_format`, or SSE.",
            "content": content,
        },
        error_answers(
            "OpenAIError", {**OPENAI_ERRORS, 413: "The file is over the size cap."}
        ),
        requestBody={"required": True, "content": form},
    )


def _models() -> dict[str, Any]:
    return operation(
        "get",
        "listModels",
        "OpenAI",
        "Every served TTS and ASR model name, aliases included",
        json_answer("The list.", "ModelList"),
        error_answers("OpenAIError", {401: OPENAI_ERRORS[401]}),
    )


def _model() -> dict[str, Any]:
    return operation(
        "get",
        "retrieveModel",
        "OpenAI",
        "One served model",
        json_answer("The model.", "Model"),
        error_answers("OpenAIError", {401: OPENAI_ERRORS[401], 404: "No such model."}),
        parameters=[
            {"name": "model", "in": "path", "required": True, "schema": STRING}
        ],
    )


TTS_ERRORS = {
    400: "`INVALID_JSON` or `VALIDATION_ERROR`.",
    401: "`AUTH_FAILED`.",
    402: "`QUOTA_EXCEEDED`.",
    403: "`AUTH_FAILED`: origin or endpoint not allowed.",
    413: "`VALIDATION_ERROR`: body over `TTS_MAX_MESSAGE_BYTES`.",
    429: "`RATE_LIMIT_EXCEEDED`.",
    500: "`INTERNAL_ERROR`.",
    503: "`MODEL_NOT_LOADED` or `STREAMING_OVERLOADED`.",
    504: "`TIMEOUT`.",
}


# POST /v1/tts answers with these beside the audio (tts/views.py, H2).
TTS_HEADERS = {
    name: {"schema": STRING}
    for name in (
        "X-Request-Id",
        "X-Audio-Duration-Seconds",
        "X-Sample-Rate",
        "X-Speaker",
    )
}


def _tts() -> dict[str, Any]:
    request_id = {
        "name": "X-Request-Id",
        "in": "header",
        "schema": {**STRING, "pattern": "^[A-Za-z0-9._:-]{1,64}$"},
    }
    ok = {
        "description": (
            "The complete file; with `word_timestamps`, JSON holding it and its words."
        ),
        "headers": TTS_HEADERS,
        "content": {
            **{t: {"schema": BINARY} for t in TTS_TYPES},
            **json_content(ref("TimedSpeech")),
        },
    }
    return operation(
        "post",
        "synthesize",
        "veena",
        "The whole audio of one TTS request",
        ok,
        error_answers("VeenaError", TTS_ERRORS),
        parameters=[request_id],
        requestBody={"required": True, "content": json_content(ref("TtsRequest"))},
    )


def _speakers() -> dict[str, Any]:
    return operation(
        "get",
        "listSpeakers",
        "veena",
        "The TTS engine's voices, aliases, formats and rates",
        json_answer("The listing.", "Speakers"),
        error_answers("VeenaError", {401: TTS_ERRORS[401], 403: TTS_ERRORS[403]}),
    )


def _voices() -> dict[str, Any]:
    return operation(
        "get",
        "listVoices",
        "OpenAI",
        "The TTS voices, as vllm-omni lists them",
        json_answer("One entry per speaker of GET /v1/tts/speakers.", "VoiceList"),
        error_answers(
            "OpenAIError",
            {401: OPENAI_ERRORS[401], 403: "Origin or TTS not allowed."},
        ),
    )


USAGE_ERRORS = {
    400: "A bad parameter (`param` names it).",
    401: "Missing or invalid key or session.",
    403: "Another account, or its key.",
    404: "No such account.",
}


def _query(name: str, schema: Schema, required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": schema}


def _usage_parameters() -> list[dict[str, Any]]:
    """The usage API's query: OpenAI's parameters, with our widths and limits."""
    widths, groups, most = usage_limits()
    array = {"type": "array", "items": STRING}
    return [
        _query("start_time", INTEGER, required=True),
        _query("end_time", INTEGER),
        _query("bucket_width", {"type": "string", "enum": widths, "default": "1d"}),
        _query("group_by", {"type": "array", "items": {"enum": groups}}),
        _query("api_key_ids", array),
        _query("models", array),
        _query("limit", {"type": "integer", "minimum": 1, "maximum": most}),
        _query("page", STRING),
        _query("account", {**STRING, "description": "A dashboard session's account."}),
    ]


# Every request that ended before this time is counted (docs/accounting.md, "As of").
AS_OF = {
    "x-data-as-of": {
        "schema": {**STRING, "format": "date-time"},
        "description": "Every request that ended before this time is counted.",
    }
}


def _usage(kind: str, what: str) -> dict[str, Any]:
    return operation(
        "get",
        f"usage_{kind}",
        "Usage",
        f"{what}, per bucket, in OpenAI's Usage API shape",
        {**json_answer("One page.", "UsagePage"), "headers": AS_OF},
        error_answers("OpenAIError", USAGE_ERRORS),
        parameters=_usage_parameters(),
    )


def _probe(
    operation: str, summary: str, schema: Schema, statuses: tuple[int, ...]
) -> dict[str, Any]:
    texts = {200: "OK.", 503: "Not ready: the body says what is missing."}
    return {
        "get": {
            "operationId": operation,
            "tags": ["Operations"],
            "summary": summary,
            "security": [],
            "responses": {
                str(status): {
                    "description": texts[status],
                    "content": json_content(schema),
                }
                for status in statuses
            },
        }
    }


def paths() -> dict[str, Any]:
    """Every REST endpoint of the gateway."""
    healthz = {"type": "object", "properties": {"status": {"const": "ok"}}}
    return {
        "/v1/audio/speech": _speech(),
        "/v1/audio/transcriptions": _transcriptions(),
        "/v1/audio/voices": _voices(),
        "/v1/models": _models(),
        "/v1/models/{model}": _model(),
        "/v1/tts": _tts(),
        "/v1/tts/speakers": _speakers(),
        "/v1/organization/usage/audio_speeches": _usage(
            "audio_speeches",
            "TTS characters billed and requests (routes tts_ws, tts_rest, speech_rest)",
        ),
        "/v1/organization/usage/audio_transcriptions": _usage(
            "audio_transcriptions",
            "ASR audio seconds and requests (routes asr_realtime, asr_rest)",
        ),
        "/healthz": _probe("healthz", "The process serves HTTP", healthz, (200,)),
        "/readyz": _probe(
            "readyz",
            "Database, channel layer and workers",
            ref("Readiness"),
            (200, 503),
        ),
    }
