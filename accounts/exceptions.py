"""Errors raised by accounts; ``tts`` and ``asr`` may import this module (accounts L2)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from gateway.exceptions import VeenaError

# Every reason of the accounts E3 table; each consumer maps them to its wire codes. The
# first seven refuse a connection or a request; the last five (and quota_exceeded) stop a
# running stream (E7).
DenialReason = Literal[
    "invalid_api_key",
    "origin_not_allowed",
    "endpoint_not_allowed",
    "too_many_streams",
    "rate_limited",
    "quota_exceeded",
    "limits_unavailable",
    "key_revoked",
    "max_session_duration",
    "lease_lost",
    "usage_unavailable",
]
# The reasons a running stream is stopped with (accounts E7, Q8, U6, U7).
StopReason = Literal[
    "key_revoked",
    "max_session_duration",
    "lease_lost",
    "quota_exceeded",
    "usage_unavailable",
    "limits_unavailable",
]


@dataclass(frozen=True)
class DeniedKey:
    """The key a denial belongs to, once the key was known: the refused request is that
    key's usage (issue 30, docs/accounting.md)."""

    account_id: int
    key_id: uuid.UUID


class AccountsError(VeenaError):
    """An expected failure inside accounts."""

    code = "accounts_error"


class AdmissionDenied(AccountsError):
    """A connection or request is refused; ``reason`` is an accounts E3 reason.

    The message is the reason only: never a key, a header or other client input.
    """

    def __init__(
        self, reason: DenialReason, *, retry_after_ms: int | None = None
    ) -> None:
        super().__init__(reason)
        self.reason: DenialReason = reason
        self.code = reason
        self.retry_after_ms = retry_after_ms
        # Set by admission when the key was known: the refusal is that key's (issue 30).
        self.key: DeniedKey | None = None


class MissingApiKey(AdmissionDenied):
    """No credential was supplied at all (tts W7 gives this its own message)."""

    def __init__(self) -> None:
        super().__init__("invalid_api_key")


class LimitsUnavailable(AccountsError):
    """The limits store could not be reached; admission fails closed (accounts E4)."""

    code = "limits_unavailable"


class KeyAlreadyRevoked(AccountsError):
    """Revocation is irreversible and happens once (accounts K6, M4)."""

    code = "key_already_revoked"
