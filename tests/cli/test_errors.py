"""Every error code and close code of both protocols has a meaning and an exit status in the CLI."""

from __future__ import annotations

import pytest

from asr import errors as asr_errors
from tts import protocol as tts_protocol
from veena_cli import errors
from veena_cli.errors import (
    CLOSE_CODES,
    EXIT_CODES,
    REALTIME_ERRORS,
    TTS_ERRORS,
    TTS_WARNINGS,
    ConnectionLost,
    realtime_error,
    tts_error,
)

# tts-ws §6 and E4.
TTS_SPEC_CODES = {
    "AUTH_FAILED",
    "RATE_LIMIT_EXCEEDED",
    "QUOTA_EXCEEDED",
    "TIMEOUT",
    "INVALID_JSON",
    "VALIDATION_ERROR",
    "MODEL_NOT_LOADED",
    "STREAMING_OVERLOADED",
    "INTERNAL_ERROR",
}
TTS_SPEC_WARNINGS = {"IGNORED_MESSAGE", "NOT_ACTIVE"}
# realtime AU-4 table, VL-2..VL-9, ER-5, ER-6, LM-5.
REALTIME_SPEC_CODES = {
    "invalid_api_key",
    "origin_not_allowed",
    "endpoint_not_allowed",
    "too_many_sessions",
    "rate_limit_exceeded",
    "insufficient_quota",
    "service_unavailable",
    "engine_unavailable",
    "invalid_payload",
    "invalid_json",
    "unknown_event",
    "invalid_value",
    "missing_required_parameter",
    "unknown_parameter",
    "not_supported",
    "invalid_audio",
    "invalid_audio_format",
    "input_audio_buffer_commit_empty",
    "internal_error",
    "buffer_overflow",
    "message_too_large",
    "idle_timeout",
    "session_expired",
    "inference_failed",
    "lease_lost",
    "usage_unavailable",
    "model_not_found",
    "invalid_event",
    "model_not_validated",
    "processing_error",
}
# tts-ws §6, realtime LM-7, and 1006 for a connection that ends without a close frame.
SPEC_CLOSE_CODES = {1000, 1001, 1003, 1006, 1008, 1009, 1011, 1013}


def test_every_tts_code_has_a_meaning() -> None:
    assert set(TTS_ERRORS) == TTS_SPEC_CODES | set(tts_protocol.CLOSE_CODES)
    assert set(TTS_WARNINGS) == TTS_SPEC_WARNINGS


def test_every_realtime_code_has_a_meaning() -> None:
    served = set(asr_errors.CLOSE_CODES) | set(asr_errors.ERROR_TYPES)
    assert set(REALTIME_ERRORS) == REALTIME_SPEC_CODES | served


def test_every_close_code_has_a_meaning() -> None:
    used = set(tts_protocol.CLOSE_CODES.values()) | set(asr_errors.CLOSE_CODES.values())
    assert set(CLOSE_CODES) == SPEC_CLOSE_CODES | used


def test_exit_statuses_are_documented_and_distinct_per_kind() -> None:
    tables = [*TTS_ERRORS.values(), *REALTIME_ERRORS.values(), *CLOSE_CODES.values()]
    assert {m.exit_code for m in tables} <= set(EXIT_CODES)
    assert (
        TTS_ERRORS["AUTH_FAILED"].exit_code
        == REALTIME_ERRORS["invalid_api_key"].exit_code
    )
    assert TTS_ERRORS["QUOTA_EXCEEDED"].exit_code == errors.EXIT_QUOTA
    assert REALTIME_ERRORS["insufficient_quota"].exit_code == errors.EXIT_QUOTA
    assert all(len(m.line) <= 80 and "\n" not in m.line for m in tables)


@pytest.mark.parametrize(
    ("envelope", "code"),
    [
        (
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_exceeded",
                    "code": "too_many_sessions",
                    "message": "Too many concurrent realtime sessions. Retry after 2.0 s.",
                    "param": None,
                    "event_id": None,
                    "retry_after_ms": 2000,
                },
            },
            "too_many_sessions",
        ),
        (
            {
                "type": "error",
                "error": "The model `x` does not exist.",
                "code": "model_not_found",
            },
            "model_not_found",
        ),
    ],
)
def test_realtime_envelopes_of_both_dialects(envelope: dict, code: str) -> None:
    err = realtime_error(envelope)
    assert err.code == code and err.exit_code == REALTIME_ERRORS[code].exit_code
    assert code in err.line


def test_tts_error_keeps_retry_hint_and_fatality() -> None:
    err = tts_error(
        {
            "code": "STREAMING_OVERLOADED",
            "message": "Streaming capacity exhausted. Retry shortly.",
            "request_id": "r",
            "retry_after_ms": 1500,
            "fatal": False,
        }
    )
    assert err.retry and err.retry_after_ms == 1500 and not err.fatal
    assert err.exit_code == errors.EXIT_LIMIT


def test_unknown_codes_and_long_messages_stay_one_bounded_line() -> None:
    err = tts_error({"code": "NEW_CODE", "message": "x\n" * 1000})
    assert err.exit_code == errors.EXIT_FAILURE
    assert "\n" not in err.line and len(err.line) < 400
    assert ConnectionLost(None).retry and not ConnectionLost(1008).retry
