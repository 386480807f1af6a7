"""Fixed error texts and close codes of ``/v1/realtime`` (§3.4, §10, §11, ER-3, LM-7).

The templates live in ``asr.protocol.MESSAGES``; this module fills in the settings they name
and maps accounts' denial (E3) and stop (E7) reasons to wire codes.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from asr import protocol
from asr.protocol import MESSAGES

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
}
DEFAULT_RETRY_MS = 1000
STOPS = {  # accounts E7 stop reason → wire code (LM-5)
    "key_revoked": "invalid_api_key",
    "max_session_duration": "session_expired",
    "lease_lost": "lease_lost",
    "quota_exceeded": "insufficient_quota",
    "usage_unavailable": "usage_unavailable",
    "limits_unavailable": "service_unavailable",
}


def message(code: str, **values: Any) -> str:
    """The fixed message of ``code`` (ER-3), with settings filled in."""
    template = MESSAGES.get(code) or MESSAGES["internal_error"]
    values.setdefault("cap", settings.ASR_MAX_BUFFER_S)
    values.setdefault("limit", settings.ASR_MAX_MESSAGE_BYTES)
    values.setdefault("s", int(settings.ASR_IDLE_TIMEOUT_S))
    values.setdefault("pending", settings.ASR_MAX_PENDING_S)
    if code == "too_many_sessions":
        return DENIALS["too_many_streams"][1].format(s=DEFAULT_RETRY_MS / 1000)
    return template.format(**values)


def denial(reason: str, retry_after_ms: int | None) -> tuple[str, str]:
    """Wire code and message of an admission denial; unknown reasons are auth failures."""
    code, template = DENIALS.get(reason, DENIALS["invalid_api_key"])
    return code, template.format(s=(retry_after_ms or DEFAULT_RETRY_MS) / 1000)


def close_code(code: str) -> int:
    """LM-7 close code of a fatal error code."""
    return protocol.CLOSE_CODES.get(code, 1011)
