"""Raw client secrets: short-lived browser credentials minted from an API key (issue 35).

A client secret is ``ek_`` + 32 random base62 characters + a 6-character checksum, the
shape of OpenAI's ``ek_…`` values and of our keys (accounts K1), so a malformed one costs
no query. Only its SHA-256 is stored (``accounts.models.client_secrets``). Each secret has
one use: ``realtime`` opens ``/v1/realtime``, ``tts`` opens ``/v1/tts/ws``; nothing else
accepts it (``accounts.auth``). Pure functions, no Django; apps mint through
``accounts.minting``.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from accounts.exceptions import InvalidExpiry
from accounts.keys import BASE62, CHECKSUM_LENGTH, RANDOM_LENGTH, checksum

SECRET_PREFIX = "ek_"
# OpenAI's bounds of ``expires_after.seconds`` and its default.
MIN_TTL_SECONDS, MAX_TTL_SECONDS, DEFAULT_TTL_SECONDS = 10, 7200, 600
# The WebSocket route each use opens (its upgrade only).
SECRET_PATHS = {"realtime": "/v1/realtime", "tts": "/v1/tts/ws"}
_SECRET_RE = re.compile(
    rf"ek_(?P<random>[0-9A-Za-z]{{{RANDOM_LENGTH}}})"
    rf"(?P<checksum>[0-9A-Za-z]{{{CHECKSUM_LENGTH}}})"
)
_MAX_LENGTH = 64


@dataclass(frozen=True)
class ParsedSecret:
    """A raw secret whose shape and checksum are valid; not yet known to exist."""

    raw: str = field(repr=False)


def is_client_secret(raw: str) -> bool:
    """True when ``raw`` claims to be a client secret (it may still be invalid)."""
    return raw.startswith(SECRET_PREFIX)


def generate_secret() -> str:
    """A new raw secret (``secrets`` randomness, about 190 bits)."""
    body = SECRET_PREFIX + "".join(secrets.choice(BASE62) for _ in range(RANDOM_LENGTH))
    return body + checksum(body)


def parse_secret(raw: str) -> ParsedSecret | None:
    """The secret if its shape and checksum are valid, else None."""
    if len(raw) > _MAX_LENGTH:
        return None
    match = _SECRET_RE.fullmatch(raw)
    if match is None:
        return None
    expected = checksum(SECRET_PREFIX + match["random"])
    if not secrets.compare_digest(expected, match["checksum"]):
        return None
    return ParsedSecret(raw=raw)


def ttl_seconds(expires_after: Any) -> int:
    """The lifetime OpenAI's ``expires_after`` asks for: ``{anchor: "created_at",
    seconds: 10–7200}``, every part optional (600 s); raises ``InvalidExpiry``."""
    if expires_after is None:
        return DEFAULT_TTL_SECONDS
    if not isinstance(expires_after, dict):
        raise InvalidExpiry("'expires_after' must be an object.", "expires_after")
    anchor = expires_after.get("anchor", "created_at")
    if anchor != "created_at":
        message = "Invalid value for 'expires_after.anchor': only 'created_at'."
        raise InvalidExpiry(message, "expires_after.anchor")
    seconds = expires_after.get("seconds", DEFAULT_TTL_SECONDS)
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int)
        or not MIN_TTL_SECONDS <= seconds <= MAX_TTL_SECONDS
    ):
        message = (
            "Invalid value for 'expires_after.seconds': an integer from "
            f"{MIN_TTL_SECONDS} to {MAX_TTL_SECONDS}."
        )
        raise InvalidExpiry(message, "expires_after.seconds")
    return seconds
