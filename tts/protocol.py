"""Wire schema of ``/v1/tts/ws`` and ``POST /v1/tts`` (docs/specs/tts-ws.md §2–§3, §6, §9, §13).

Supported: the legacy request (every reference field with its default, validated in table order,
speaker last: R1–R5), ``ping``, ``cancel`` with or without ``request_id``, ``clear``, the
incremental ``start`` / ``text`` / ``flush`` / ``end`` events, and the extension fields
``request_id``, ``speed``, ``keep_alive``, ``timestamps`` and ``word_timestamps``. Server events follow §3.1; the
error envelope is the reference's, plus ``fatal``, ``retry_after_ms`` and ``valid_speakers``.

Deviations from the reference (all decided in §15): a non-object or binary message is a protocol
error instead of a crash; any number of pings may precede the request; ``format`` may be ``pcm``
or ``mulaw``; unknown fields are ignored instead of passed on. Issue 9: JSON that is not UTF-8,
holds a lone surrogate, nests deeper than 32, has an integer literal over 64 digits or uses
``NaN`` / ``Infinity`` is ``INVALID_JSON`` (``gateway.jsontext``); an integer ``flush_id`` is
within ±(2**53 − 1); ``cancel.request_id`` must be a string.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway import jsontext
from gateway.logs import REQUEST_ID
from tts import request_fields
from tts.audio import DEFAULT_FORMAT, DEFAULT_RATE
from tts.messages import Sampling

MAX_TEXT_CHARS = 50_000  # TTS_MAX_TEXT_CHARS's default
# §6: each error code's close code (when fatal) and REST status.
ERROR_CODES = {
    "AUTH_FAILED": (1008, 401),
    "RATE_LIMIT_EXCEEDED": (1008, 429),
    "QUOTA_EXCEEDED": (1008, 402),
    "TIMEOUT": (1000, 504),
    "INVALID_JSON": (1003, 400),
    "VALIDATION_ERROR": (1003, 400),
    "MODEL_NOT_LOADED": (1011, 503),
    "STREAMING_OVERLOADED": (1013, 503),
    "INTERNAL_ERROR": (1011, 500),
}
CLOSE_CODES = {code: close for code, (close, _) in ERROR_CODES.items()}
HTTP_STATUS = {code: status for code, (_, status) in ERROR_CODES.items()}
# §6 "Fatal with keep_alive": these codes end only the request on a keep-alive stream.
NON_FATAL_CODES = frozenset(
    ("VALIDATION_ERROR", "MODEL_NOT_LOADED", "STREAMING_OVERLOADED")
)
REST_EXCLUDED_FIELDS = ("keep_alive", "timestamps", "request_id")  # H1
MAX_SAFE_INTEGER = 2**53 - 1  # I4: an integer flush_id every JSON client reads exactly


class TtsProtocolError(Exception):
    """A client message that cannot be used: code, fixed message, close code, and context."""

    def __init__(
        self,
        code: str,
        message: str,
        close_code: int | None = None,
        *,
        event: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code, self.message = code, message
        self.close_code = close_code if close_code is not None else CLOSE_CODES[code]
        self.event = event  # the message's event name, when it was a JSON object
        self.raw: dict[str, Any] = {}
        self.extra: dict[str, Any] = {}  # additive error fields (valid_speakers, X4)

    @property
    def keep_alive(self) -> bool | None:
        """The message's own ``keep_alive`` when it is a JSON boolean (K1 decides fatality)."""
        value = self.raw.get("keep_alive")
        return value if isinstance(value, bool) else None

    @property
    def request_id(self) -> str | None:
        """The message's ``request_id`` when it is well formed."""
        value = self.raw.get("request_id")
        return value if isinstance(value, str) and REQUEST_ID.fullmatch(value) else None


@dataclass(frozen=True)
class TtsRequest(Sampling):
    """A validated request message or ``start`` (speaker not yet resolved)."""

    text: str
    speaker: str = "male1"
    chunking: bool = False
    normalize: bool = True
    format: str = DEFAULT_FORMAT
    sample_rate: int = DEFAULT_RATE
    request_id: str | None = None
    keep_alive: bool = False
    timestamps: bool = False
    word_timestamps: bool = False  # issue 35: each segment's words, timed
    incremental: bool = False  # a ``start``: text arrives in ``text`` events (§9.2)


@dataclass(frozen=True)
class Ping:
    """``{"event":"ping"}``: answered with exactly ``{"event":"pong"}`` (R9)."""


@dataclass(frozen=True)
class Cancel:
    """``cancel``: the active request, or only ``request_id`` when given (C1)."""

    request_id: str | None = None


@dataclass(frozen=True)
class Clear:
    """``clear``: drop buffered text and unsent audio (C2)."""


@dataclass(frozen=True)
class TextInput:
    """``text``: more text for the active incremental request (I2)."""

    text: str


@dataclass(frozen=True)
class Flush:
    """``flush``: synthesise everything buffered, then ``flushed`` (I4)."""

    flush_id: str | int | None = None


@dataclass(frozen=True)
class End:
    """``end``: a flush, then ``complete`` once its audio is sent (I5)."""


ClientEvent = TtsRequest | Ping | Cancel | Clear | TextInput | Flush | End


def _loads(data: str | bytes, limit: int | None = None) -> Any:
    """R3: anything a JSON parser rejects or lets through unsafely is ``INVALID_JSON``; a
    message over ``limit`` bytes raises ``jsontext.TooLarge`` (W11)."""
    try:
        return jsontext.loads(data, limit=limit)
    except jsontext.JsonError as exc:
        raise TtsProtocolError("INVALID_JSON", f"Invalid JSON: {exc.reason}") from None


def parse_client_event(
    text: str | None, data: bytes | None = None, *, limit: int | None = None
) -> ClientEvent:
    """Parse one WebSocket message; raise TtsProtocolError (R3, R8), or
    ``jsontext.TooLarge`` for a text over ``limit`` bytes (W11)."""
    if text is None:
        raise TtsProtocolError("INVALID_JSON", "Invalid JSON: binary message")
    message = _loads(text, limit)
    if not isinstance(message, dict):
        raise TtsProtocolError("VALIDATION_ERROR", "Request must be a JSON object")
    event = message.get("event")
    name = "request" if event is None else str(event)[:40]
    parse = CLIENT_EVENTS.get(name)
    if parse is None:
        error = TtsProtocolError(
            "VALIDATION_ERROR", f"Unknown event '{name}'", event=name
        )
        error.raw = message
        raise error
    try:
        return parse(message)
    except TtsProtocolError as exc:
        exc.event, exc.raw = name, message
        raise


def parse_rest_body(body: bytes) -> TtsRequest:
    """Parse a ``POST /v1/tts`` body (H1): the request fields except the WebSocket-only ones."""
    message = _loads(body)
    if not isinstance(message, dict):
        raise TtsProtocolError("VALIDATION_ERROR", "Request must be a JSON object")
    for name in REST_EXCLUDED_FIELDS:
        message.pop(name, None)
    return _parse_request(message)


def _invalid(message: str) -> TtsProtocolError:
    return TtsProtocolError("VALIDATION_ERROR", message)


def _field_error(name: str, expected: str) -> TtsProtocolError:
    """R2's wording: ``Field 'name' must be …``."""
    return _invalid(request_fields.InvalidField.expected(name, expected).message)


def _request(data: dict[str, Any], *, incremental: bool) -> TtsRequest:
    try:
        return TtsRequest(**request_fields.request(data, incremental=incremental))
    except request_fields.InvalidField as exc:
        raise _invalid(exc.message) from None


def _parse_request(data: dict[str, Any]) -> TtsRequest:
    return _request(data, incremental=False)


def _parse_start(data: dict[str, Any]) -> TtsRequest:
    return _request(data, incremental=True)


def _parse_cancel(data: dict[str, Any]) -> Cancel:
    rid = data.get("request_id")
    if rid is not None and not isinstance(rid, str):
        raise _field_error("request_id", "a string")
    return Cancel(request_id=rid[:64] if rid is not None else None)


def _parse_text(data: dict[str, Any]) -> TextInput:
    text = data.get("text")
    if not isinstance(text, str):
        raise _field_error("text", "a string")
    return TextInput(text=text)


def _parse_flush(data: dict[str, Any]) -> Flush:
    flush_id = data.get("flush_id")
    if flush_id is not None and not (
        isinstance(flush_id, str)
        or (
            isinstance(flush_id, int)
            and not isinstance(flush_id, bool)
            and abs(flush_id) <= MAX_SAFE_INTEGER
        )
    ):
        raise _field_error("flush_id", "a string or an integer of at most 53 bits")
    if isinstance(flush_id, str):
        flush_id = flush_id[:64]
    return Flush(flush_id=flush_id)


CLIENT_EVENTS: dict[str, Callable[[dict[str, Any]], ClientEvent]] = {
    "request": _parse_request,
    "start": _parse_start,
    "ping": lambda data: Ping(),
    "cancel": _parse_cancel,
    "clear": lambda data: Clear(),
    "text": _parse_text,
    "flush": _parse_flush,
    "end": lambda data: End(),
}
