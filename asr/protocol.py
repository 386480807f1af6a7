"""Wire schema of ``/v1/realtime`` (specs/realtime-asr.md), OpenAI dialect subset.

Supported so far: ``session.update`` / ``transcription_session.update`` (input format and
transcription language/prompt), ``input_audio_buffer.append`` / ``commit`` / ``clear``, and the
server events ``session.created``, ``session.updated``, ``input_audio_buffer.committed`` /
``cleared``, ``conversation.item.input_audio_transcription.delta`` / ``completed`` / ``failed``
and ``error``. Not yet: the vLLM dialect, server VAD, beta item announcements; their events are
answered with ``unknown_event``.
"""

from __future__ import annotations

import binascii
import json
import secrets
import string
from dataclasses import dataclass
from typing import Any

import pybase64

from asr.audio import INPUT_RATES

_ALPHABET = string.ascii_letters + string.digits
FORMATS = {"audio/pcm": None, "audio/pcmu": 8000, "audio/pcma": 8000}
BETA_FORMATS = {
    "pcm16": "audio/pcm",
    "g711_ulaw": "audio/pcmu",
    "g711_alaw": "audio/pcma",
}
CLOSE_CODES = {
    "invalid_api_key": 1008,
    "origin_not_allowed": 1008,
    "endpoint_not_allowed": 1008,
    "rate_limit_exceeded": 1008,
    "insufficient_quota": 1008,
    "service_unavailable": 1013,
    "engine_unavailable": 1011,
    "inference_failed": 1011,
    "message_too_large": 1009,
    "buffer_overflow": 1009,
    "idle_timeout": 1000,
    "session_expired": 1000,
}


def new_id(prefix: str) -> str:
    """A random id such as ``event_Ab3cD4eF5gH6iJ7k``."""
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(16))


class ProtocolError(Exception):
    """A client event that cannot be applied: ``code``, fixed ``message`` and ``param``."""

    def __init__(self, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.param = code, message, param


@dataclass(frozen=True)
class ClientEvent:
    """A parsed client event: its type, its event_id and its raw fields."""

    type: str
    event_id: str | None
    data: dict[str, Any]


KNOWN_EVENTS = frozenset(
    {
        "session.update",
        "transcription_session.update",
        "input_audio_buffer.append",
        "input_audio_buffer.commit",
        "input_audio_buffer.clear",
    }
)


def parse_client_event(text: str | None, data: bytes | None) -> ClientEvent:
    """Parse one frame; raise ProtocolError for bad JSON, bad shape or unknown types."""
    if text is None:
        raise ProtocolError("invalid_payload", "Binary frames are not supported.")
    try:
        body = json.loads(text)
    except json.JSONDecodeError:
        raise ProtocolError("invalid_payload", "Invalid JSON payload.") from None
    if not isinstance(body, dict):
        raise ProtocolError("invalid_payload", "Event must be a JSON object.")
    kind = body.get("type")
    if not isinstance(kind, str):
        raise ProtocolError("invalid_payload", "Event 'type' must be a string.", "type")
    event_id = body.get("event_id") if isinstance(body.get("event_id"), str) else None
    if kind not in KNOWN_EVENTS:
        raise ProtocolError("unknown_event", f"Unknown event type: '{kind[:64]}'.")
    return ClientEvent(type=kind, event_id=event_id, data=body)


def decode_audio(event: ClientEvent) -> bytes:
    """The base64 payload of an append event."""
    audio = event.data.get("audio")
    if not isinstance(audio, str):
        raise ProtocolError(
            "invalid_value", "'audio' must be a base64 string.", "audio"
        )
    try:
        return pybase64.b64decode(audio, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError("invalid_audio", "Invalid base64 audio.", "audio") from None


def input_format(event: ClientEvent) -> tuple[str, int] | None:
    """The (format, rate) an update asks for, or None when it leaves the format alone."""
    session = event.data.get("session")
    if not isinstance(session, dict):
        raise ProtocolError("invalid_value", "'session' must be an object.", "session")
    beta = session.get("input_audio_format")
    if isinstance(beta, str):
        if beta not in BETA_FORMATS:
            raise ProtocolError(
                "invalid_value",
                "Unsupported input_audio_format.",
                "session.input_audio_format",
            )
        fmt = BETA_FORMATS[beta]
        return fmt, FORMATS[fmt] or 24_000
    spec = ((session.get("audio") or {}).get("input") or {}).get("format")
    if spec is None:
        return None
    param = "session.audio.input.format"
    if not isinstance(spec, dict) or spec.get("type") not in FORMATS:
        raise ProtocolError("invalid_value", "Unsupported audio input format.", param)
    fixed = FORMATS[spec["type"]]
    rate = spec.get("rate", fixed or 24_000)
    if (fixed and rate != fixed) or (not fixed and rate not in INPUT_RATES):
        raise ProtocolError(
            "invalid_value", "Unsupported audio input rate.", param + ".rate"
        )
    return spec["type"], rate


def server_event(kind: str, **fields: Any) -> dict[str, Any]:
    """A server event with a fresh event_id."""
    return {"type": kind, "event_id": new_id("event_"), **fields}


def error_event(
    code: str,
    message: str,
    *,
    kind: str = "invalid_request_error",
    param: str | None = None,
    client_event_id: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The OpenAI error envelope (realtime ER-1)."""
    error = {
        "type": kind,
        "code": code,
        "message": message,
        "param": param,
        "event_id": client_event_id,
    }
    error.update({k: v for k, v in extra.items() if v is not None})
    return server_event("error", error=error)
