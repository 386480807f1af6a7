"""Wire schema of ``/v1/tts/ws`` (specs/tts-ws.md §2–§3, §6).

Supported here: the legacy request (every reference field, validated in table order per R1–R4),
``ping``, ``cancel`` (with or without ``request_id``), the error envelope with ``fatal`` and
``retry_after_ms``, and the header / progress / complete events. The extensions of §9 other than
``request_id`` and ``speed`` (keep_alive, incremental text, clear, timestamps) are not built yet:
their fields are accepted and ignored, as R2 asks for unknown fields.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from tts.audio import FORMATS, SAMPLE_RATES

MAX_TEXT_CHARS = 50_000
CLOSE_CODES = {
    "AUTH_FAILED": 1008,
    "RATE_LIMIT_EXCEEDED": 1008,
    "QUOTA_EXCEEDED": 1008,
    "TIMEOUT": 1000,
    "INVALID_JSON": 1003,
    "VALIDATION_ERROR": 1003,
    "MODEL_NOT_LOADED": 1011,
    "STREAMING_OVERLOADED": 1013,
    "INTERNAL_ERROR": 1011,
}
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


class ProtocolError(Exception):
    """A client message that cannot be used: its code, fixed message and close code."""

    def __init__(self, code: str, message: str, close_code: int | None = None) -> None:
        super().__init__(message)
        self.code, self.message = code, message
        self.close_code = close_code if close_code is not None else CLOSE_CODES[code]


@dataclass(frozen=True)
class TtsRequest:
    """A validated request message (speaker not yet resolved)."""

    text: str
    speaker: str = "male1"
    temperature: float = 0.8
    top_k: int = 50
    top_p: float = 1.0
    max_tokens: int = 4096
    repetition_penalty: float = 1.05
    seed: int | None = None
    chunking: bool = False
    normalize: bool = True
    format: str = "wav"
    sample_rate: int = 16_000
    request_id: str | None = None
    speed: float = 1.0


@dataclass(frozen=True)
class Control:
    """A control message: ping or cancel."""

    event: str
    request_id: str | None = None


ClientEvent = TtsRequest | Control


def parse_client_event(text: str) -> ClientEvent:
    """Parse one text message into a request or a control event; raise ProtocolError."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProtocolError("INVALID_JSON", f"Invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ProtocolError("VALIDATION_ERROR", "Request must be a JSON object")
    event = data.get("event", "request")
    if event is None or event == "request":
        return _parse_request(data)
    if event in ("ping", "cancel", "clear"):
        rid = data.get("request_id")
        return Control(event=event, request_id=rid if isinstance(rid, str) else None)
    return Control(event=str(event))


def _field_error(name: str, expected: str) -> ProtocolError:
    return ProtocolError("VALIDATION_ERROR", f"Field '{name}' must be {expected}")


def _number(
    data: dict[str, Any], name: str, default: float, lo: float, hi: float
) -> float:
    value = data.get(name)
    if value is None:
        return default
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    )
    if not ok or not lo <= value <= hi:
        raise _field_error(name, f"a number between {lo:g} and {hi:g}")
    return float(value)


def _integer(
    data: dict[str, Any], name: str, default: int | None, lo: int, hi: int
) -> int | None:
    value = data.get(name)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise _field_error(name, f"an integer between {lo} and {hi}")
    return value


def _boolean(data: dict[str, Any], name: str, default: bool) -> bool:
    value = data.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _field_error(name, "a boolean")
    return value


def _parse_request(data: dict[str, Any]) -> TtsRequest:
    text = data.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ProtocolError("VALIDATION_ERROR", "Text is required and cannot be empty")
    if len(text) > MAX_TEXT_CHARS:
        raise ProtocolError(
            "VALIDATION_ERROR",
            f"Text too long: {len(text)} chars (max {MAX_TEXT_CHARS})",
        )
    speaker = data.get("speaker")
    if speaker is not None and not isinstance(speaker, str):
        raise _field_error("speaker", "a string")
    temperature = _number(data, "temperature", 0.8, 0.0, 2.0)
    top_k = _integer(data, "top_k", 50, -1, 1000)
    top_p = _number(data, "top_p", 1.0, 0.0, 1.0)
    if top_p <= 0.0:
        raise _field_error("top_p", "a number greater than 0 and at most 1")
    max_tokens = _integer(data, "max_tokens", 4096, 1, 8192)
    repetition_penalty = _number(data, "repetition_penalty", 1.05, 1.0, 2.0)
    seed = _integer(data, "seed", None, 0, 4_294_967_295)
    chunking = _boolean(data, "chunking", False)
    normalize = _boolean(data, "normalize", True)
    fmt = data.get("format") or "wav"
    if fmt not in FORMATS:
        raise ProtocolError(
            "VALIDATION_ERROR",
            f"Unsupported format '{fmt}' (supported: {', '.join(FORMATS)})",
        )
    rate = _integer(data, "sample_rate", 8000 if fmt == "mulaw" else 16_000, 1, 10**6)
    if rate not in SAMPLE_RATES or (fmt == "mulaw" and rate != 8000):
        allowed = "8000" if fmt == "mulaw" else ", ".join(map(str, SAMPLE_RATES))
        raise _field_error("sample_rate", f"one of {allowed}")
    request_id = data.get("request_id")
    if request_id is not None and not (
        isinstance(request_id, str) and _REQUEST_ID.fullmatch(request_id)
    ):
        raise _field_error("request_id", "at most 64 characters of [A-Za-z0-9._:-]")
    speed = _number(data, "speed", 1.0, 0.5, 2.0)
    return TtsRequest(
        text=text,
        speaker=speaker or "male1",
        temperature=temperature,
        top_k=top_k if top_k is not None else 50,
        top_p=top_p,
        max_tokens=max_tokens if max_tokens is not None else 4096,
        repetition_penalty=repetition_penalty,
        seed=seed,
        chunking=chunking,
        normalize=normalize,
        format=fmt,
        sample_rate=rate if rate is not None else 16_000,
        request_id=request_id,
        speed=speed,
    )


def error_event(
    code: str, message: str, request_id: str, *, fatal: bool = True, **extra: Any
) -> dict[str, Any]:
    """The reference error envelope with the additive fields."""
    error = {"code": code, "message": message, "request_id": request_id, "fatal": fatal}
    error.update({k: v for k, v in extra.items() if v is not None})
    return {"event": "error", "error": error}
