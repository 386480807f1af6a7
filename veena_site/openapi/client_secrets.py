"""The client-secret endpoints in the OpenAPI document: ``POST /v1/realtime/client_secrets``
(OpenAI's GA shape) and ``POST /v1/tts/client_secrets`` (the same shape for ``/v1/tts/ws``).

Bounds and enumerations come from the code that checks them: the lifetime
(``accounts.client_secrets``), the realtime session's keys and values (``asr.updates``,
``asr.audio``) and the TTS pins (``tts.pins``, ``tts.audio``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from accounts.client_secrets import (
    DEFAULT_TTL_SECONDS,
    MAX_TTL_SECONDS,
    MIN_TTL_SECONDS,
    SECRET_PREFIX,
)
from accounts.keys import CHECKSUM_LENGTH, RANDOM_LENGTH
from asr.audio import G711_RATE, INPUT_RATES
from asr.config import LOGPROBS_INCLUDE
from asr.updates import MAX_MS, NOISE_TYPES
from tts.audio import FORMATS, SAMPLE_RATES
from tts.pins import SESSION_TYPE
from veena_site.openapi.paths import (
    OPENAI_ERRORS,
    TTS_ERRORS,
    error_answers,
    json_answer,
    json_content,
    operation,
)
from veena_site.openapi.schemas import (
    BOOLEAN,
    INTEGER,
    NUMBER,
    STRING,
    Schema,
    nullable,
    obj,
    ref,
)

PCM_FORMATS = ("audio/pcm", "audio/pcmu", "audio/pcma")


def closed(required: list[str], **properties: Schema) -> Schema:
    """An object with exactly these properties: the server refuses any other key."""
    return {**obj(required, **properties), "additionalProperties": False}


def _expires_after() -> Schema:
    seconds = {
        **INTEGER,
        "minimum": MIN_TTL_SECONDS,
        "maximum": MAX_TTL_SECONDS,
        "default": DEFAULT_TTL_SECONDS,
    }
    after = obj(
        [],
        anchor={"const": "created_at", "default": "created_at"},
        seconds=seconds,
    )
    return {**nullable(after), "description": "When the secret stops opening sockets."}


def _input_format() -> Schema:
    rate = {
        "type": ["integer", "null"],
        "enum": [*INPUT_RATES, G711_RATE, None],
        "description": f"audio/pcm: {INPUT_RATES}; audio/pcmu, audio/pcma: {G711_RATE}.",
    }
    return closed(
        ["type"], type={"type": "string", "enum": list(PCM_FORMATS)}, rate=rate
    )


def _turn_detection() -> Schema:
    ms = {**INTEGER, "minimum": 0, "maximum": MAX_MS}
    turn = closed(
        ["type"],
        type={"const": "server_vad"},
        threshold=nullable({**NUMBER, "minimum": 0, "maximum": 1}),
        prefix_padding_ms=nullable(ms),
        silence_duration_ms=nullable(ms),
        idle_timeout_ms={"type": "null", "description": "Not supported."},
        create_response=nullable(BOOLEAN),
        interrupt_response=nullable(BOOLEAN),
        eagerness={"description": "Accepted and ignored."},
    )
    return {**nullable(turn), "description": "server_vad, or null for manual commits."}


def _realtime_session() -> Schema:
    """The ``session`` a realtime secret applies, checked as a GA ``session.update``."""
    transcription = closed(
        [],
        model=nullable({**STRING, "description": "A served ASR model name."}),
        language=nullable(STRING),
        prompt=nullable({**STRING, "maxLength": settings.ASR_MAX_PROMPT_CHARS}),
    )
    noise = closed(
        ["type"],
        type={"type": "string", "enum": list(NOISE_TYPES)},
        strength=nullable(NUMBER),
    )
    audio_input = closed(
        [],
        format=nullable(_input_format()),
        transcription=nullable(transcription),
        turn_detection=_turn_detection(),
        noise_reduction=nullable(noise),
    )
    ignored = {"description": "Accepted and ignored (an echo's field)."}
    return closed(
        ["type"],
        type={
            "const": "transcription",
            "description": "`realtime` (conversation) sessions are refused.",
        },
        id=ignored,
        object=ignored,
        expires_at=ignored,
        include=nullable({"type": "array", "items": {"const": LOGPROBS_INCLUDE}}),
        audio=closed([], input=audio_input),
    )


def _realtime_session_object() -> Schema:
    """The GA transcription session object the answer (and ``session.created``) shows."""
    audio_input = obj(
        ["format", "noise_reduction", "transcription", "turn_detection"],
        format=obj(
            ["type"], type={"type": "string", "enum": list(PCM_FORMATS)}, rate=INTEGER
        ),
        noise_reduction=nullable({"type": "object"}),
        transcription=obj(
            ["model", "language", "prompt"],
            model=STRING,
            language=nullable(STRING),
            prompt=nullable(STRING),
        ),
        turn_detection=nullable({"type": "object"}),
    )
    return obj(
        ["type", "id", "object", "expires_at", "audio", "include"],
        type={"const": "transcription"},
        id=STRING,
        object={"const": "realtime.transcription_session"},
        expires_at=INTEGER,
        audio=obj(["input"], input=audio_input),
        include=nullable({"type": "array", "items": STRING}),
    )


def _tts_session(echo: bool) -> Schema:
    """The pins of a TTS secret: asked for (``echo=False``) or as resolved."""
    voice = "The voice id it resolved to." if echo else "A voice id or alias."
    pins = {
        "voice": nullable({**STRING, "description": voice}),
        "format": nullable({"type": "string", "enum": list(FORMATS)}),
        "sample_rate": nullable(
            {
                "type": "integer",
                "enum": list(SAMPLE_RATES),
                "description": "Only with `format`; the format's default when absent.",
            }
        ),
    }
    if echo:
        return obj(["type", *pins], type={"const": SESSION_TYPE}, **pins)
    type_ = {"const": SESSION_TYPE, "default": SESSION_TYPE}
    return closed([], type=type_, **pins)


def _minted(session: Schema) -> Schema:
    length = RANDOM_LENGTH + CHECKSUM_LENGTH
    return obj(
        ["value", "expires_at", "session"],
        value={**STRING, "pattern": f"^{SECRET_PREFIX}[0-9A-Za-z]{{{length}}}$"},
        expires_at={**INTEGER, "description": "Seconds since the epoch."},
        session=session,
    )


def secret_schemas() -> dict[str, Schema]:
    """The component schemas of both minting endpoints."""
    return {
        "RealtimeClientSecretRequest": obj(
            [],
            expires_after=_expires_after(),
            session=nullable(_realtime_session()),
        ),
        "RealtimeClientSecret": _minted(_realtime_session_object()),
        "TtsClientSecretRequest": obj(
            [],
            expires_after=_expires_after(),
            session=nullable(_tts_session(echo=False)),
        ),
        "TtsClientSecret": _minted(_tts_session(echo=True)),
    }


def _mint(
    operation_id: str, opens: str, kind: str, envelope: str, errors: dict[int, str]
) -> dict[str, Any]:
    return operation(
        "post",
        operation_id,
        "OpenAI" if envelope == "OpenAIError" else "veena",
        f"Mint a short-lived `ek_` secret that opens {opens} only",
        json_answer("The secret, shown once.", f"{kind}ClientSecret"),
        error_answers(envelope, errors),
        description=(
            "Authenticated by an API key allowed on the endpoint the secret opens. "
            "The secret is refused by every REST route, this one included."
        ),
        requestBody={
            "required": False,
            "content": json_content(ref(f"{kind}ClientSecretRequest")),
        },
    )


def secret_paths() -> dict[str, Any]:
    """``POST /v1/realtime/client_secrets`` and ``POST /v1/tts/client_secrets``."""
    realtime_errors = {
        400: "A bad `expires_after` or `session` (`param` names the field).",
        401: OPENAI_ERRORS[401],
        403: "Origin not allowed, or the key may not use realtime ASR.",
        413: "The body is over 64 KiB.",
    }
    tts_errors = {
        400: "`INVALID_JSON`, or `VALIDATION_ERROR`: a bad `expires_after` or `session`.",
        401: "`AUTH_FAILED` (also when the server runs without TTS authentication).",
        403: TTS_ERRORS[403],
        413: "`VALIDATION_ERROR`: the body is over 16 KiB.",
    }
    return {
        "/v1/realtime/client_secrets": _mint(
            "createRealtimeClientSecret",
            "/v1/realtime",
            "Realtime",
            "OpenAIError",
            realtime_errors,
        ),
        "/v1/tts/client_secrets": _mint(
            "createTtsClientSecret", "/v1/tts/ws", "Tts", "VeenaError", tts_errors
        ),
    }
