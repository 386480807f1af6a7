"""What every protocol error code and close code means to a CLI user, and its exit status.

One table per source: veena TTS codes (tts-ws §6, plus its warnings), realtime codes (realtime
§3.4, §9, §10; both dialects) and WebSocket close codes. Each entry is a one-line explanation
and an exit status; ``retry`` marks conditions that a later attempt may get past. The server's
own ``message`` (a fixed string, never exception text) is shown after ours.
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_FAILURE = 1  # anything not listed below, including a client bug
EXIT_USAGE = 2  # bad command line (argparse's own status)
EXIT_AUTH = 3  # key missing, wrong, revoked, or not allowed here
EXIT_LIMIT = 4  # rate limit, concurrency or capacity: retry later
EXIT_QUOTA = 5  # the account's quota is used up
EXIT_INPUT = 6  # the input (text, audio file, option) was refused
EXIT_SERVER = 7  # the server failed (engine unavailable, inference failed)
EXIT_CONNECTION = 8  # cannot connect, TLS failure, or the connection kept dropping
EXIT_TIMEOUT = 9  # the server ended the session for time (idle, maximum length)
EXIT_INTERRUPTED = 130  # Ctrl-C

EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_FAILURE: "unexpected failure",
    EXIT_USAGE: "bad command line",
    EXIT_AUTH: "authentication or permission",
    EXIT_LIMIT: "rate limit or capacity (retry later)",
    EXIT_QUOTA: "quota exhausted",
    EXIT_INPUT: "input refused",
    EXIT_SERVER: "server-side failure",
    EXIT_CONNECTION: "connection failure",
    EXIT_TIMEOUT: "session time limit",
    EXIT_INTERRUPTED: "interrupted",
}


@dataclass(frozen=True)
class Meaning:
    """One code: a one-line explanation, the exit status, and whether retrying may help."""

    line: str
    exit_code: int
    retry: bool = False


TTS_ERRORS = {  # tts-ws §6
    "AUTH_FAILED": Meaning(
        "the server refused the API key (check --key or VEENA_API_KEY)", EXIT_AUTH
    ),
    "RATE_LIMIT_EXCEEDED": Meaning("rate limit exceeded", EXIT_LIMIT, retry=True),
    "QUOTA_EXCEEDED": Meaning(
        "the account's text-to-speech quota is used up", EXIT_QUOTA
    ),
    "TIMEOUT": Meaning("the server ended the stream for time", EXIT_TIMEOUT),
    "INVALID_JSON": Meaning("the server could not parse a message", EXIT_FAILURE),
    "VALIDATION_ERROR": Meaning("the server refused the request", EXIT_INPUT),
    "MODEL_NOT_LOADED": Meaning(
        "no speech engine is available (worker loading or lost)",
        EXIT_SERVER,
        retry=True,
    ),
    "STREAMING_OVERLOADED": Meaning(
        "the server is at capacity", EXIT_LIMIT, retry=True
    ),
    "INTERNAL_ERROR": Meaning("the server failed the request", EXIT_SERVER, retry=True),
}
TTS_WARNINGS = {  # tts-ws E4: never end a request
    "IGNORED_MESSAGE": "the server ignored a message",
    "NOT_ACTIVE": "the server had no such active request",
}
REALTIME_ERRORS = {  # realtime §3.4 AU-4, §9 VL-1 to VL-9, §10 ER-5 and ER-6, §11 LM-1 to LM-7
    "invalid_api_key": Meaning(
        "the server refused the API key (check --key or VEENA_API_KEY)", EXIT_AUTH
    ),
    "origin_not_allowed": Meaning("this key is not allowed from here", EXIT_AUTH),
    "endpoint_not_allowed": Meaning(
        "this key may not use the realtime endpoint", EXIT_AUTH
    ),
    "too_many_sessions": Meaning(
        "too many concurrent sessions", EXIT_LIMIT, retry=True
    ),
    "rate_limit_exceeded": Meaning("rate limit exceeded", EXIT_LIMIT, retry=True),
    "insufficient_quota": Meaning(
        "the account's transcription quota is used up", EXIT_QUOTA
    ),
    "service_unavailable": Meaning(
        "the server's limits store is unavailable", EXIT_LIMIT, retry=True
    ),
    "engine_unavailable": Meaning(
        "no transcription engine is available", EXIT_SERVER, retry=True
    ),
    "inference_failed": Meaning("the server failed to transcribe", EXIT_SERVER),
    "lease_lost": Meaning("the server lost the session's lease", EXIT_SERVER),
    "usage_unavailable": Meaning("the server cannot record usage", EXIT_SERVER),
    "internal_error": Meaning("the server failed an event", EXIT_SERVER),
    "processing_error": Meaning("the server failed an event", EXIT_SERVER),
    "idle_timeout": Meaning("the server closed the idle session", EXIT_TIMEOUT),
    "session_expired": Meaning("the session reached its maximum length", EXIT_TIMEOUT),
    "invalid_session": Meaning(
        "the client secret's session is no longer valid: mint a new one", EXIT_AUTH
    ),
    "buffer_overflow": Meaning("an audio item grew past the server's cap", EXIT_INPUT),
    "message_too_large": Meaning("a message exceeded the server's cap", EXIT_INPUT),
    "invalid_audio": Meaning("the server refused the audio encoding", EXIT_INPUT),
    "invalid_audio_format": Meaning("the server refused the audio format", EXIT_INPUT),
    "input_audio_buffer_commit_empty": Meaning(
        "an audio item was too short to commit", EXIT_INPUT
    ),
    "invalid_value": Meaning("the server refused a setting", EXIT_INPUT),
    "missing_required_parameter": Meaning(
        "the server missed a required setting", EXIT_INPUT
    ),
    "unknown_parameter": Meaning("the server does not know a setting", EXIT_INPUT),
    "not_supported": Meaning("the server does not support a setting", EXIT_INPUT),
    "model_not_found": Meaning("the server does not serve that model", EXIT_INPUT),
    "invalid_event": Meaning("the server refused an event", EXIT_FAILURE),
    "model_not_validated": Meaning(
        "the session was used before its model was set", EXIT_FAILURE
    ),
    "invalid_payload": Meaning("the server could not parse a message", EXIT_FAILURE),
    "invalid_json": Meaning("the server could not parse a message", EXIT_FAILURE),
    "unknown_event": Meaning("the server does not know an event", EXIT_FAILURE),
}
CLOSE_CODES = {  # RFC 6455 / IANA, as tts-ws §6 and realtime LM-7 use them
    1000: Meaning("the server closed the connection", EXIT_FAILURE),
    1001: Meaning("the server is shutting down", EXIT_CONNECTION, retry=True),
    1003: Meaning("the server refused a message it cannot use", EXIT_FAILURE),
    1006: Meaning("the connection dropped", EXIT_CONNECTION, retry=True),
    1008: Meaning("the server refused the session (policy)", EXIT_AUTH),
    1009: Meaning("a message was too big for the server", EXIT_INPUT),
    1011: Meaning("the server hit an internal error", EXIT_SERVER, retry=True),
    1013: Meaning("the server is overloaded", EXIT_LIMIT, retry=True),
}
UNKNOWN = Meaning("the server reported an error", EXIT_FAILURE)


class CliError(Exception):
    """An expected failure: one line for the user, the exit status, whether to retry."""

    def __init__(
        self, line: str, exit_code: int = EXIT_FAILURE, *, retry: bool = False
    ) -> None:
        super().__init__(line)
        self.line, self.exit_code, self.retry = line, exit_code, retry


class ServerError(CliError):
    """An ``error`` event from the server, with our meaning of its code."""

    def __init__(
        self,
        meaning: Meaning,
        code: str,
        message: str,
        *,
        fatal: bool = True,
        retry_after_ms: int | None = None,
    ) -> None:
        detail = f"{code}: {message}" if message else code
        super().__init__(
            f"{meaning.line} ({detail})", meaning.exit_code, retry=meaning.retry
        )
        self.code, self.fatal, self.retry_after_ms = code, fatal, retry_after_ms


class ConnectionLost(CliError):
    """The connection ended without the event the client waited for."""

    def __init__(self, code: int | None, reason: str = "") -> None:
        meaning = CLOSE_CODES.get(code or 1006, UNKNOWN)
        detail = f"close {code}" if code else "no close frame"
        if reason:
            detail += f": {reason}"
        super().__init__(
            f"{meaning.line} ({detail})", meaning.exit_code, retry=meaning.retry
        )
        self.code = code


def tts_error(error: object) -> ServerError:
    """The ``error`` object of a TTS ``error`` event as a ServerError."""
    fields = error if isinstance(error, dict) else {}
    code = str(fields.get("code") or "")
    retry_after = fields.get("retry_after_ms")
    return ServerError(
        TTS_ERRORS.get(code, UNKNOWN),
        code or "unknown",
        _safe(fields.get("message")),
        fatal=fields.get("fatal", True) is not False,
        retry_after_ms=retry_after if isinstance(retry_after, int) else None,
    )


def realtime_error(event: dict[str, object]) -> ServerError:
    """A realtime ``error`` event (OpenAI envelope or vLLM's flat one) as a ServerError."""
    error = event.get("error")
    if isinstance(error, dict):  # OpenAI: {"error": {"type", "code", "message", …}}
        code, message = str(error.get("code") or ""), _safe(error.get("message"))
        retry_after = error.get("retry_after_ms")
    else:  # vLLM: {"error": "<message>", "code": "<code>"}
        code, message = str(event.get("code") or ""), _safe(error)
        retry_after = None
    return ServerError(
        REALTIME_ERRORS.get(code, UNKNOWN),
        code or "unknown",
        message,
        retry_after_ms=retry_after if isinstance(retry_after, int) else None,
    )


def _safe(message: object, limit: int = 300) -> str:
    """A server message as one printable line of bounded length."""
    text = " ".join(str(message or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
