"""Errors raised by accounts; ``tts`` and ``asr`` may import this module (accounts L2)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from gateway.exceptions import VeenaError
from gateway.wording import count

# Every reason of the accounts E3 table; each consumer maps them to its wire codes. The
# first eight refuse a connection or a request; the last four (and quota_exceeded) stop a
# running stream (E7). ``service_unavailable``: the database did not answer (issue 31,
# docs/operations.md "Outages"), refused like ``limits_unavailable``.
DenialReason = Literal[
    "invalid_api_key",
    "origin_not_allowed",
    "endpoint_not_allowed",
    "too_many_streams",
    "rate_limited",
    "quota_exceeded",
    "limits_unavailable",
    "service_unavailable",
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
class StreamCap:
    """The concurrency cap a ``too_many_streams`` denial hit: its limit, and whose it is."""

    limit: int
    # True: the key's own cap (accounts E9); False: the plan's, for the whole account.
    per_key: bool = False

    def text(self, noun: str = "stream") -> str:
        """ "2 streams at once on this plan", "1 stream at once for this key"."""
        owner = "for this key" if self.per_key else "on this plan"
        return f"{count(self.limit, noun)} at once {owner}"


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
        self,
        reason: DenialReason,
        *,
        retry_after_ms: int | None = None,
        cap: StreamCap | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason: DenialReason = reason
        self.code = reason
        self.retry_after_ms = retry_after_ms
        # too_many_streams: the cap that was full, for the client's message.
        self.cap = cap
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


class InvalidExpiry(AccountsError):
    """A client secret's ``expires_after`` is malformed: a fixed message and its param."""

    code = "invalid_expiry"

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.message, self.param = message, param
