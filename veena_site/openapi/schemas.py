"""The OpenAPI components: request and response bodies, error envelopes, security schemes.

Enumerations and limits come from the code that enforces them (formats, sample rates, error
codes, usage API limits) and from this process's settings (size caps), so the document
describes the server that serves it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from accounts.selectors.openai_usage import GROUPS, LIMITS, WIDTHS
from openai_rest.encode import RESPONSE_FORMATS
from tts.audio import FORMATS, SAMPLE_RATES
from tts.protocol import ERROR_CODES

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    """A reference to a component schema."""
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Schema) -> Schema:
    """``schema`` or null (OpenAPI 3.1: a JSON Schema type list)."""
    return {"anyOf": [schema, {"type": "null"}]}


def obj(required: list[str], **properties: Schema) -> Schema:
    """An object with these properties; others are allowed (fields may be added)."""
    return {"type": "object", "required": required, "properties": properties}


STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer"}
NUMBER: Schema = {"type": "number"}
BOOLEAN: Schema = {"type": "boolean"}


def _openai_error_detail() -> Schema:
    return obj(
        ["message", "type", "param", "code"],
        message=STRING,
        type=STRING,
        param=nullable(STRING),
        code=nullable(STRING),
    )


def _openai_error() -> Schema:
    envelope = obj(["error"], error=ref("OpenAIErrorDetail"))
    return {**envelope, "description": "OpenAI's error envelope."}


def _veena_error() -> Schema:
    detail = obj(
        ["code", "message", "request_id"],
        code={"type": "string", "enum": sorted(ERROR_CODES)},
        message=STRING,
        request_id=STRING,
        retry_after_ms=INTEGER,
    )
    return {**obj(["error"], error=detail), "description": "The TTS error envelope."}


def _speech_request() -> Schema:
    voice_object = obj(["id"], id=STRING)
    # word_timestamps: true needs stream_format: "sse" (openai_rest.speech_request).
    timed = obj(["word_timestamps"], word_timestamps={"const": True})
    sse = obj(["stream_format"], stream_format={"const": "sse"})
    fields = obj(
        ["model", "input", "voice"],
        model={**STRING, "description": "A name from GET /v1/models (kind tts)."},
        input={
            **STRING,
            "minLength": 1,
            "maxLength": settings.OPENAI_SPEECH_MAX_INPUT_CHARS,
        },
        voice={
            "description": "Our voice id or alias, or an OpenAI voice name.",
            "anyOf": [STRING, voice_object],
        },
        response_format={
            "type": "string",
            "enum": list(RESPONSE_FORMATS),
            "default": "mp3",
        },
        speed={"type": "number", "minimum": 0.25, "maximum": 4.0, "default": 1.0},
        instructions={**STRING, "description": "Accepted and ignored."},
        stream_format={"type": "string", "enum": ["audio", "sse"], "default": "audio"},
        word_timestamps={
            **BOOLEAN,
            "default": False,
            "description": (
                "Our extension, with `stream_format: sse` only (else 400): "
                "`speech.audio.words` events before the audio their words start in."
            ),
        },
    )
    return {**fields, "if": timed, "then": sse}


def _model() -> Schema:
    return obj(
        ["id", "object", "created", "owned_by"],
        id=STRING,
        object={"const": "model"},
        created=INTEGER,
        owned_by=STRING,
        kind={"type": "string", "enum": ["tts", "asr"]},
        alias_of=nullable(STRING),
    )


def _model_list() -> Schema:
    return obj(
        ["object", "data"],
        object={"const": "list"},
        data={"type": "array", "items": ref("Model")},
    )


def _tts_request() -> Schema:
    """The ``POST /v1/tts`` body: the socket's request fields but the socket-only ones."""
    return obj(
        ["text"],
        text={**STRING, "minLength": 1, "maxLength": settings.TTS_MAX_TEXT_CHARS},
        speaker={**STRING, "default": "male1"},
        temperature={"type": "number", "minimum": 0, "maximum": 2, "default": 0.8},
        top_k={"type": "integer", "minimum": -1, "maximum": 1000, "default": 50},
        top_p={"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": 1.0},
        max_tokens={"type": "integer", "minimum": 1, "maximum": 8192, "default": 4096},
        repetition_penalty={
            "type": "number",
            "minimum": 1,
            "maximum": 2,
            "default": 1.05,
        },
        seed=nullable({"type": "integer", "minimum": 0, "maximum": 4294967295}),
        chunking={**BOOLEAN, "default": False},
        normalize={**BOOLEAN, "default": True},
        format={"type": "string", "enum": list(FORMATS), "default": "wav"},
        sample_rate={"type": "integer", "enum": list(SAMPLE_RATES), "default": 16000},
        speed={"type": "number", "minimum": 0.5, "maximum": 2, "default": 1.0},
        word_timestamps={
            **BOOLEAN,
            "default": False,
            "description": "Answer JSON (`TimedSpeech`) with the audio and its words.",
        },
    )


def _timed_words() -> Schema:
    """Words timed in ms from the start of the request's audio (issue 35)."""
    word = obj(
        ["word", "start_ms", "end_ms"],
        word=STRING,
        start_ms={**INTEGER, "minimum": 0},
        end_ms={**INTEGER, "minimum": 0},
    )
    return {"type": "array", "items": word}


def _timed_speech() -> Schema:
    """``POST /v1/tts`` with ``word_timestamps``: the file in base64 and its words."""
    return obj(
        [
            "request_id",
            "content_type",
            "sample_rate",
            "speaker",
            "audio_duration_seconds",
            "audio_base64",
            "words",
        ],
        request_id=STRING,
        content_type={**STRING, "description": "What the binary answer's would be."},
        sample_rate={"type": "integer", "enum": list(SAMPLE_RATES)},
        speaker=STRING,
        audio_duration_seconds={**NUMBER, "minimum": 0},
        audio_base64={**STRING, "contentEncoding": "base64"},
        words=ref("TimedWords"),
    )


def _speakers() -> Schema:
    speaker = obj(
        ["id", "name", "languages", "gender", "default", "aliases"],
        id=STRING,
        name=STRING,
        languages={"type": "array", "items": STRING},
        gender=nullable(STRING),
        default=BOOLEAN,
        aliases={"type": "array", "items": STRING},
    )
    capabilities = obj(
        ["speed", "seed", "sampling_params", "timestamps", "word_timestamps"],
        speed=BOOLEAN,
        seed=BOOLEAN,
        sampling_params=BOOLEAN,
        timestamps=STRING,
        word_timestamps={
            **STRING,
            "description": "How words are timed: `durations` (the model's own) or "
            "`estimate`.",
        },
    )
    return obj(
        ["engine", "model_version", "ready", "sample_rates", "formats", "speakers"],
        engine=STRING,
        model_version=STRING,
        ready=BOOLEAN,
        native_sample_rate=INTEGER,
        sample_rates={"type": "array", "items": INTEGER},
        formats={"type": "array", "items": STRING},
        default_speaker=STRING,
        capabilities=capabilities,
        speakers={"type": "array", "items": speaker},
    )


def _voice_list() -> Schema:
    """``GET /v1/audio/voices``: the speakers of ``GET /v1/tts/speakers``, per voice."""
    voice = obj(
        ["id", "object", "name", "language", "languages", "sample_rate", "engine"],
        id=STRING,
        object={"const": "voice"},
        name=STRING,
        language=nullable(STRING),
        languages={"type": "array", "items": STRING},
        sample_rate={**INTEGER, "description": "The engine's native rate."},
        engine=STRING,
        model={**STRING, "description": "An id of GET /v1/models."},
        default=BOOLEAN,
        aliases={"type": "array", "items": STRING},
    )
    return obj(
        ["object", "data", "voices"],
        object={"const": "list"},
        data={"type": "array", "items": voice},
        voices={"type": "array", "items": STRING, "description": "The ids of `data`."},
    )


def _usage_page() -> Schema:
    result = obj(
        ["object", "num_model_requests", "api_key_id", "model"],
        object={
            "type": "string",
            "enum": [
                "organization.usage.audio_speeches.result",
                "organization.usage.audio_transcriptions.result",
            ],
        },
        characters={
            **INTEGER,
            "description": "audio_speeches: TTS characters billed (those delivered).",
        },
        seconds={
            **INTEGER,
            "description": "audio_transcriptions: audio seconds received.",
        },
        num_model_requests=INTEGER,
        project_id={"type": "null"},
        user_id={"type": "null"},
        api_key_id=nullable(STRING),
        model=nullable(STRING),
    )
    bucket = obj(
        ["object", "start_time", "end_time", "results"],
        object={"const": "bucket"},
        start_time=INTEGER,
        end_time=INTEGER,
        results={"type": "array", "items": result},
    )
    return obj(
        ["object", "data", "has_more", "next_page"],
        object={"const": "page"},
        data={"type": "array", "items": bucket},
        has_more=BOOLEAN,
        next_page=nullable(STRING),
    )


def _readiness() -> Schema:
    counts = {"type": "object", "additionalProperties": INTEGER}
    names = {
        "type": "object",
        "additionalProperties": {"type": "array", "items": STRING},
    }
    return obj(
        ["ready", "database", "channel_layer", "workers", "topology"],
        ready=BOOLEAN,
        database=BOOLEAN,
        channel_layer=BOOLEAN,
        workers=counts,
        engines=names,
        topology={"type": "string", "enum": ["embedded", "distributed"]},
    )


def usage_limits() -> tuple[list[str], list[str], int]:
    """The usage API's bucket widths, group fields and largest ``limit``."""
    return list(WIDTHS), list(GROUPS), max(high for _, high in LIMITS.values())


def components() -> dict[str, Any]:
    """``components``: schemas and security schemes."""
    builders = {
        "OpenAIErrorDetail": _openai_error_detail,
        "OpenAIError": _openai_error,
        "VeenaError": _veena_error,
        "SpeechRequest": _speech_request,
        "Model": _model,
        "ModelList": _model_list,
        "TtsRequest": _tts_request,
        "TimedWords": _timed_words,
        "TimedSpeech": _timed_speech,
        "Speakers": _speakers,
        "VoiceList": _voice_list,
        "UsagePage": _usage_page,
        "Readiness": _readiness,
    }
    return {
        "schemas": {name: build() for name, build in builders.items()},
        "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"},
            "apiKeyHeader": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
        },
    }
