"""Fixed error texts, types and close codes of ``/v1/realtime`` (§3.4, §10, §11, ER-3, LM-7).

The one table of each: close codes, error types, message templates (``message`` fills in the
settings they name), and accounts' denial (accounts E3) and stop (accounts E7) reasons as wire codes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from accounts.exceptions import StreamCap
from gateway.link.jobclient import Outcome
from gateway.link.outputs import Fail
from gateway.outages import Failure
from gateway.wording import count

CLOSE_CODES = {
    "invalid_api_key": 1008,
    "origin_not_allowed": 1008,
    "endpoint_not_allowed": 1008,
    "rate_limit_exceeded": 1008,
    "insufficient_quota": 1008,
    "too_many_sessions": 1008,
    "service_unavailable": 1013,
    "engine_unavailable": 1011,
    "inference_failed": 1011,
    "lease_lost": 1011,
    "usage_unavailable": 1011,
    "message_too_large": 1009,
    "buffer_overflow": 1009,
    "idle_timeout": 1000,
    "session_expired": 1000,
    "invalid_session": 1008,
}
ERROR_TYPES = {  # ER-5, ER-6: everything else is an invalid_request_error
    "internal_error": "server_error",
    "buffer_overflow": "server_error",
    "inference_failed": "server_error",
    "engine_unavailable": "server_error",
    "service_unavailable": "server_error",
    "lease_lost": "server_error",
    "usage_unavailable": "server_error",
    "rate_limit_exceeded": "rate_limit_exceeded",
    "too_many_sessions": "rate_limit_exceeded",
    "insufficient_quota": "insufficient_quota",
}
MESSAGES = {  # ER-3: fixed templates
    "invalid_json": "Invalid JSON",
    "invalid_payload": "Invalid JSON payload.",
    "binary_frame": "Binary frames are not supported; send input_audio_buffer.append with base64 audio.",
    "not_object": "Event must be a JSON object.",
    "no_type": "Event 'type' must be a string.",
    "invalid_audio_value": "'audio' must be a base64 string.",
    "invalid_audio": "Invalid base64 audio.",
    "invalid_audio_format": "PCM16 audio must have an even number of bytes.",
    "internal_error": "Internal server error.",
    "processing_error": "Error processing the event.",
    "buffer_overflow": "Input audio buffer exceeds {cap} s; commit more often.",
    "message_too_large": "Message exceeds the maximum size of {limit}.",
    "inference_failed": "Transcription failed",
    "engine_unavailable": "Transcription engine unavailable.",
    "idle_timeout": "Session closed after {s} s without client events.",
    "session_expired": "Session reached its maximum duration.",
    "invalid_session": "The client secret's session configuration is no longer valid.",
    "invalid_api_key": "Incorrect API key provided.",
    "insufficient_quota": "You exceeded your current quota.",
    "lease_lost": "Session lease lost.",
    "usage_unavailable": "Usage recording unavailable.",
    "service_unavailable": "Service temporarily unavailable.",
    "model_not_validated": "Model not validated. Make sure to validate the model by sending a session.update event.",
    "event_id_too_long": "'event_id' must be at most {n}.",
    "pending_overflow": "Audio awaiting transcription exceeds {pending} s; wait for transcripts.",
    "rate_limit_exceeded": "Too many control events. Retry after {retry:.1f} s.",
    "commit_empty": "Error committing input audio buffer: buffer too small. Expected at least {min}ms of audio, but buffer only has {ms:.2f}ms of audio.",
}
FAILED_ERROR = {
    "type": "server_error",
    "code": "inference_failed",
    "message": "Transcription failed",
    "param": None,
}


DENIALS = {  # accounts E3 reason → (wire code, message) (AU-4, AU-6)
    "invalid_api_key": ("invalid_api_key", "Incorrect API key provided."),
    "origin_not_allowed": ("origin_not_allowed", "Origin not allowed for this key."),
    "endpoint_not_allowed": (
        "endpoint_not_allowed",
        "This key may not use the realtime endpoint.",
    ),
    "too_many_streams": (
        "too_many_sessions",
        "Too many concurrent realtime sessions. Retry after {s:.1f} s.",
    ),
    "rate_limited": (
        "rate_limit_exceeded",
        "Rate limit exceeded. Retry after {s:.1f} s.",
    ),
    "quota_exceeded": ("insufficient_quota", "You exceeded your current quota."),
    "limits_unavailable": ("service_unavailable", "Service temporarily unavailable."),
    "service_unavailable": ("service_unavailable", "Service temporarily unavailable."),
}
# too_many_streams when the cap that was full is known (issue 32: name the cap).
AT_CAP = "Session limit reached: {cap}. Retry after {s} s."
DEFAULT_RETRY_MS = 1000
STOPS = {  # accounts E7 stop reason → wire code (LM-5)
    "key_revoked": "invalid_api_key",
    "max_session_duration": "session_expired",
    "lease_lost": "lease_lost",
    "quota_exceeded": "insufficient_quota",
    "usage_unavailable": "usage_unavailable",
    "limits_unavailable": "service_unavailable",
    "service_unavailable": "service_unavailable",
}


def message(code: str, **values: Any) -> str:
    """The fixed message of ``code`` (ER-3), with settings filled in."""
    template = MESSAGES.get(code) or MESSAGES["internal_error"]
    values.setdefault("cap", settings.ASR_MAX_BUFFER_S)
    values.setdefault("limit", count(settings.ASR_MAX_MESSAGE_BYTES, "byte"))
    values.setdefault("s", int(settings.ASR_IDLE_TIMEOUT_S))
    values.setdefault("pending", settings.ASR_MAX_PENDING_S)
    if code == "too_many_sessions":
        return DENIALS["too_many_streams"][1].format(s=DEFAULT_RETRY_MS / 1000)
    return template.format(**values)


def close_code(code: str) -> int:
    """LM-7 close code of a fatal error code."""
    return CLOSE_CODES.get(code, 1011)


@dataclass(frozen=True)
class Reject:
    """A client event refused: one error event, and the session goes on (ER-1)."""

    code: str
    message: str
    param: str | None = None
    event_id: str | None = None  # the client event's


@dataclass(frozen=True)
class RealtimeFail(Fail):
    """End the session: one error event, then the close (ER-2, LM-7).

    ``admission``: the OpenAI envelope whatever the dialect (AU-4); ``reason``: the
    accounts E3/E7 reason the usage record keeps instead of the wire code.
    """

    code: str
    message: str | None = None
    close_code: int | None = None
    retry_after_ms: int | None = None
    admission: bool = False
    reason: str | None = None

    @property
    def text(self) -> str:
        """The message sent: the given one, else the code's fixed one."""
        return self.message or message(self.code)

    @property
    def close(self) -> int:
        """The close code: the given one, else the code's (LM-7)."""
        return self.close_code or close_code(self.code)

    @property
    def completed(self) -> bool:
        """An idle timeout completes the record (U9); every other error fails it."""
        return self.code == "idle_timeout"


def stop(reason: str) -> RealtimeFail:
    """accounts E7: the reason's wire error; the record keeps the reason (LM-5)."""
    return RealtimeFail(STOPS.get(reason, "service_unavailable"), reason=reason)


def denial(
    reason: str, retry_after_ms: int | None, cap: StreamCap | None = None
) -> RealtimeFail:
    """AU-4: an admission denial, naming the concurrency cap that was full; unknown
    reasons are auth failures."""
    code, template = DENIALS.get(reason, DENIALS["invalid_api_key"])
    seconds = (retry_after_ms or DEFAULT_RETRY_MS) / 1000
    if cap is not None:
        template = AT_CAP.format(cap=cap.text("session"), s="{s:.1f}")
    text = template.format(s=seconds)
    limited = code in ("too_many_sessions", "rate_limit_exceeded")
    retry = (retry_after_ms or DEFAULT_RETRY_MS) if limited else None
    return RealtimeFail(code, message=text, retry_after_ms=retry, admission=True)


def rate_limited(retry_after_ms: int) -> RealtimeFail:
    """Too many control events: the retry hint, then close."""
    text = message("rate_limit_exceeded", retry=retry_after_ms / 1000)
    return RealtimeFail(
        "rate_limit_exceeded", message=text, retry_after_ms=retry_after_ms
    )


def outcome_error(outcome: Outcome, *, failing_over: bool) -> RealtimeFail:
    """A worker admission that failed (WK-2, AU-4), or a failover's (WK-7, no admission
    error): no worker with the engine loaded, or every slot busy."""
    if failing_over or outcome is Outcome.NOT_LOADED:
        return RealtimeFail("engine_unavailable", admission=not failing_over)
    return RealtimeFail(
        "too_many_sessions", close_code=1013, retry_after_ms=1000, admission=True
    )


def failure_code(failure: Failure, *, vllm: bool) -> str:
    """The consumer boundary's error code: ``internal_error`` (vLLM ``processing_error``)
    for a bug, ``service_unavailable`` for an outage (the limits store's code, §3.4)."""
    code = "processing_error" if failure == "internal_error" and vllm else failure
    return code
