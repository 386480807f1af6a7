"""Playground tokens: short-lived, signed credentials for the browser playground.

A token is ``vpt_`` + a value signed with ``django.core.signing`` under its own salt, so
nothing about it is stored: its claims name the account, the account's playground key
(``ApiKey.kind == "playground"``, whose usage the dashboard shows as "playground"), the
member who minted it, the origin of the page that minted it, and when it expires.
``accounts.auth`` is the only reader; it also checks that key, account and member are
still valid, so revoking the playground key, deactivating the account or removing the
member refuses every token at once.

Every character is legal in a WebSocket subprotocol (base64url, ``.`` and ``_``), and no
part of a token looks like an API key (accounts K1).
"""

from __future__ import annotations

import secrets
import time
import uuid
from dataclasses import dataclass, field

from django.core import signing

TOKEN_PREFIX = "vpt_"
# A purpose-specific salt: no other signed value of this site verifies as a token.
_SALT = "veena.accounts.playground-token"
# Longer input is refused before any decoding; real tokens are about 230 characters.
MAX_TOKEN_LENGTH = 512
# Routes a token opens (the playground's), by path: WebSocket upgrades and HTTP GETs.
TOKEN_WEBSOCKET_PATHS = frozenset({"/v1/tts/ws", "/v1/realtime"})
TOKEN_HTTP_GET_PATHS = frozenset({"/v1/tts/speakers"})


@dataclass(frozen=True)
class TokenClaims:
    """What a valid token says; ``raw`` stays out of ``repr`` (and so out of logs)."""

    account_id: int
    key_id: uuid.UUID
    user_id: int
    origin: str
    expires_at: float
    raw: str = field(default="", repr=False, compare=False)


def _signer() -> signing.Signer:
    # "." separates value and signature: ":" is not a legal subprotocol character.
    return signing.Signer(salt=_SALT, sep=".")


def is_token(raw: str) -> bool:
    """True when ``raw`` claims to be a token (it may still be invalid)."""
    return raw.startswith(TOKEN_PREFIX)


def token_sign(
    *, account_id: int, key_id: uuid.UUID, user_id: int, origin: str, expires_at: float
) -> str:
    """A new token for these claims; a random nonce makes each one unique."""
    payload = {
        "a": account_id,
        "k": key_id.hex,
        "u": user_id,
        "o": origin,
        "x": int(expires_at),
        "n": secrets.token_urlsafe(9),
    }
    return TOKEN_PREFIX + _signer().sign_object(payload)


def token_parse(raw: str, *, now: float | None = None) -> TokenClaims | None:
    """The claims of a well-signed token that has not expired, else None.

    Pure apart from ``SECRET_KEY`` (and its fallbacks): no database or cache access.
    """
    if not is_token(raw) or len(raw) > MAX_TOKEN_LENGTH:
        return None
    try:
        payload = _signer().unsign_object(raw[len(TOKEN_PREFIX) :])
        claims = TokenClaims(
            account_id=int(payload["a"]),
            key_id=uuid.UUID(hex=str(payload["k"])),
            user_id=int(payload["u"]),
            origin=str(payload["o"]),
            expires_at=float(payload["x"]),
            raw=raw,
        )
    except (signing.BadSignature, ValueError, TypeError, KeyError):
        return None
    if claims.expires_at <= (time.time() if now is None else now):
        return None
    return claims
