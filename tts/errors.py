"""How accounts denials and worker outcomes reach a TTS client (docs/specs/tts-ws.md §6, X3, W7).

Shared by the WebSocket consumer, the REST views and the REST job client; messages are fixed
strings (X2, accounts S10).
"""

from __future__ import annotations

from django.conf import settings

from accounts.exceptions import AdmissionDenied, MissingApiKey
from gateway.link.jobclient import Outcome
from gateway.outages import Failure
from gateway.wording import retry_after
from tts.events import Error, rate_limit_message
from tts.outputs import TtsFail

OVERLOADED = "Streaming capacity exhausted. Retry shortly."
DENIALS = {  # accounts E3 reason → (wire code, message)
    "invalid_api_key": ("AUTH_FAILED", "Invalid API key"),
    "origin_not_allowed": ("AUTH_FAILED", "Origin not allowed"),
    "endpoint_not_allowed": ("AUTH_FAILED", "Endpoint not allowed for this key"),
    "key_revoked": ("AUTH_FAILED", "Invalid API key"),
    "rate_limited": ("RATE_LIMIT_EXCEEDED", ""),
    "too_many_streams": ("RATE_LIMIT_EXCEEDED", ""),
    "quota_exceeded": ("QUOTA_EXCEEDED", "Quota exceeded"),
    "limits_unavailable": ("STREAMING_OVERLOADED", OVERLOADED),
    "service_unavailable": ("STREAMING_OVERLOADED", OVERLOADED),
    # accounts E7: reasons that stop a running stream.
    "max_session_duration": ("TIMEOUT", "Maximum session duration reached"),
    "lease_lost": ("INTERNAL_ERROR", "Stream lease lost"),
    "usage_unavailable": ("INTERNAL_ERROR", "Usage metering unavailable"),
}
# §6: a plan's maximum session length is TIMEOUT with 1008, not W8's 1000.
DENIAL_CLOSE_CODES = {"max_session_duration": 1008}
OUTCOME_ERRORS = {
    Outcome.OVERLOADED: ("STREAMING_OVERLOADED", OVERLOADED),
    Outcome.NOT_LOADED: ("MODEL_NOT_LOADED", "TTS model not initialized"),
    Outcome.LOST: ("MODEL_NOT_LOADED", "synthesis worker stopped responding"),
}
RETRY_CODES = ("RATE_LIMIT_EXCEEDED", "STREAMING_OVERLOADED")  # X3

WireError = tuple[str, str, int | None]  # (code, message, retry_after_ms)


def denial_error(denied: AdmissionDenied) -> WireError:
    """An accounts denial as (code, message, retry_after_ms) (accounts E3, X3, W7)."""
    code, message = DENIALS.get(denied.reason, DENIALS["invalid_api_key"])
    if isinstance(denied, MissingApiKey):
        message = "API key required"
    retry = None
    if code in RETRY_CODES:
        retry = max(1, denied.retry_after_ms or settings.TTS_OVERLOAD_RETRY_MS)
    if denied.cap is not None:
        message = (
            f"Stream limit reached: {denied.cap.text()}. {retry_after(retry or 1)}"
        )
    elif code == "RATE_LIMIT_EXCEEDED":
        message = rate_limit_message(retry or 1)
    return code, message, retry


def denial_fail(
    denied: AdmissionDenied,
    *,
    request_id: str | None = None,
    fatal: bool | None = None,
) -> TtsFail:
    """An accounts denial (W6, K4, accounts Q7) or stop (accounts E7) as the stream's §6 error; the record
    keeps the accounts reason as its ``error_code`` (U3)."""
    code, message, retry = denial_error(denied)
    return TtsFail(
        code,
        message,
        close_code=DENIAL_CLOSE_CODES.get(denied.reason),
        request_id=request_id,
        fatal=fatal,
        usage_error=denied.reason,
        retry_after_ms=retry,
    )


def outcome_error(outcome: Outcome) -> WireError:
    """A failed worker admission or a lost worker (Q3, Z4) as a wire error."""
    code, message = OUTCOME_ERRORS[outcome]
    retry = settings.TTS_OVERLOAD_RETRY_MS if code in RETRY_CODES else None
    return code, message, retry


def failure_error(failure: Failure, request_id: str) -> Error:
    """The consumer boundary's fatal error (``gateway.link.consumers``): a bug, or an outage of
    Redis or the database (§6: STREAMING_OVERLOADED, as for the limits store, with X3's hint)."""
    if failure == "service_unavailable":
        retry = settings.TTS_OVERLOAD_RETRY_MS
        return Error(
            "STREAMING_OVERLOADED", OVERLOADED, request_id, retry_after_ms=retry
        )
    return Error("INTERNAL_ERROR", "Internal server error", request_id)
