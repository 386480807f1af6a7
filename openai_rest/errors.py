"""OpenAI's error envelope and HTTP codes for the audio endpoints.

``{"error": {"message", "type", "param", "code"}}``; 429 and 503 carry ``retry-after`` (whole
seconds) and ``retry-after-ms``. Messages are fixed strings, never an exception's text.
"""

from __future__ import annotations

import json
import math
from typing import Any

from django.http import JsonResponse

from accounts.exceptions import AdmissionDenied, MissingApiKey
from gateway.link.jobclient import Outcome
from gateway.outages import Failure, is_outage

INVALID = "invalid_request_error"
DEFAULT_RETRY_MS = 1000
# too_many_streams when the cap that was full is known (issue 32: name the cap).
AT_CAP = "Concurrency limit reached: {cap}. Please try again later."


class OpenAiError(Exception):
    """One error as OpenAI sends it: status, message, type, param and code."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = INVALID,
        param: str | None = None,
        code: str | None = None,
        retry_after_ms: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type = status, message, type_
        self.param, self.code, self.retry_after_ms = param, code, retry_after_ms

    def body(self) -> dict[str, dict[str, str | None]]:
        """The JSON envelope."""
        return {
            "error": {
                "message": self.message[:500],
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def invalid(
    message: str, param: str | None = None, code: str | None = None
) -> OpenAiError:
    """A 400 ``invalid_request_error``."""
    return OpenAiError(400, message, param=param, code=code)


def json_object(body: bytes, *, max_bytes: int) -> dict[str, Any]:
    """A request body that must be a JSON object; raise ``OpenAiError`` (400, 413)."""
    if len(body) > max_bytes:
        raise OpenAiError(413, "Request body too large.", code="request_too_large")
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise invalid("We could not parse the JSON body of your request.") from None
    if not isinstance(data, dict):
        raise invalid("The request body must be a JSON object.")
    return data


def error_response(error: OpenAiError, request_id: str) -> JsonResponse:
    """The envelope with its status, ``retry-after`` on 429/503, and the request id."""
    response = JsonResponse(error.body(), status=error.status)
    if error.status in (429, 503):
        retry = error.retry_after_ms or DEFAULT_RETRY_MS
        response["retry-after"] = str(math.ceil(retry / 1000))
        response["retry-after-ms"] = str(retry)
    response["x-request-id"] = request_id
    return response


_DENIALS: dict[
    str, tuple[int, str, str, str]
] = {  # reason → status, type, code, message
    "invalid_api_key": (401, INVALID, "invalid_api_key", "Incorrect API key provided."),
    "key_revoked": (401, INVALID, "invalid_api_key", "Incorrect API key provided."),
    "origin_not_allowed": (
        403,
        "permission_error",
        "origin_not_allowed",
        "Origin not allowed for this key.",
    ),
    "endpoint_not_allowed": (
        403,
        "permission_error",
        "endpoint_not_allowed",
        "This key may not use this endpoint.",
    ),
    "rate_limited": (
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for requests. Please try again later.",
    ),
    "too_many_streams": (
        429,
        "requests",
        "rate_limit_exceeded",
        "Too many concurrent requests. Please try again later.",
    ),
    "quota_exceeded": (
        429,
        "insufficient_quota",
        "insufficient_quota",
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    "limits_unavailable": (
        503,
        "server_error",
        "service_unavailable",
        "The service is temporarily unavailable. Please retry shortly.",
    ),
    "service_unavailable": (
        503,
        "server_error",
        "service_unavailable",
        "The service is temporarily unavailable. Please retry shortly.",
    ),
    "max_session_duration": (
        400,
        INVALID,
        "session_expired",
        "The request exceeded the plan's maximum session length.",
    ),
    "lease_lost": (500, "server_error", "lease_lost", "The request lost its lease."),
    "usage_unavailable": (
        500,
        "server_error",
        "usage_unavailable",
        "Usage metering is unavailable.",
    ),
}
_OUTCOMES = {
    Outcome.OVERLOADED: (
        503,
        "server_overloaded",
        "The engine is currently overloaded, please try again later.",
    ),
    Outcome.NOT_LOADED: (503, "model_not_loaded", "The model is not loaded yet."),
    Outcome.LOST: (500, "worker_lost", "The worker stopped responding."),
}


def denial_error(denied: AdmissionDenied) -> OpenAiError:
    """An accounts denial or stop reason as OpenAI's error (a missing key is 401 too)."""
    status, type_, code, message = _DENIALS.get(
        denied.reason, _DENIALS["invalid_api_key"]
    )
    if isinstance(denied, MissingApiKey):
        message = "You didn't provide an API key."
    if denied.cap is not None:
        message = AT_CAP.format(cap=denied.cap.text("request"))
    retry = None
    if status in (429, 503) and code != "insufficient_quota":
        retry = max(1, denied.retry_after_ms or DEFAULT_RETRY_MS)
    return OpenAiError(status, message, type_=type_, code=code, retry_after_ms=retry)


def outcome_error(outcome: Outcome) -> OpenAiError:
    """A failed worker admission, or a lost worker, as OpenAI's server error."""
    status, code, message = _OUTCOMES[outcome]
    retry = DEFAULT_RETRY_MS if status == 503 else None
    return OpenAiError(
        status, message, type_="server_error", code=code, retry_after_ms=retry
    )


def boundary_error(error: BaseException) -> tuple[OpenAiError, Failure]:
    """What a request's boundary answers for ``error``: 503 ``service_unavailable`` when
    Redis or the database did not answer (``gateway.outages``), else a 500."""
    if is_outage(error):
        status, type_, code, message = _DENIALS["service_unavailable"]
        unavailable = OpenAiError(
            status, message, type_=type_, code=code, retry_after_ms=DEFAULT_RETRY_MS
        )
        return unavailable, "service_unavailable"
    return server_error(), "internal_error"


def server_error(
    message: str = "The server had an error processing your request.",
) -> OpenAiError:
    """A 500 ``server_error`` with a fixed message."""
    return OpenAiError(500, message, type_="server_error", code="internal_error")


def timeout_error() -> OpenAiError:
    """The job outlived its time limit."""
    return OpenAiError(
        504, "The request timed out.", type_="server_error", code="timeout"
    )
