"""The only code that reads API credentials (accounts A1–A5).

Sources, in order of precedence (A2): ``Authorization: Bearer``, ``X-API-Key``, the subprotocol
``veena-api-key.<key>`` (on ``asr`` also ``openai-insecure-api-key.<key>``), and ``?api_key=``
while ``ALLOW_QUERY_API_KEY`` is on. All sources that carry a key must carry the same one.

WebSocket principals are cached per process by key hash for ``API_KEY_CACHE_SECONDS`` and
used only while their version equals the limits store's ``apikey:<id>:v`` (A5), which every
key change writes on commit: a revocation reaches every process at its next lookup.

Playground tokens (``accounts.tokens``) travel in the same sources except the query, and
only to the playground's routes: the WebSocket upgrades of ``/v1/tts/ws`` and
``/v1/realtime`` and ``GET /v1/tts/speakers``. A valid token authenticates as its
account's playground key, which is then checked like any key (A4), for a member still in
the account, and with the minting page's origin as its only allowed origin (S13). A token
that is malformed, expired, on another route or no longer backed gets ``invalid_api_key``,
as a bad key does. Token principals are not cached: each connect reads the database.
"""

from __future__ import annotations

import dataclasses
import hmac
import logging
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs
from uuid import UUID

from channels.db import database_sync_to_async
from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone

from accounts.exceptions import AdmissionDenied, MissingApiKey
from accounts.keys import ParsedKey, hash_key, parse_key
from accounts.limits import get_limiter, in_store
from accounts.models.api_keys import ApiKey
from accounts.models.choices import Endpoint, KeyKind, KeyStatus
from accounts.origins import normalize_origin
from accounts.selectors import playground_member_is_active
from accounts.tokens import (
    TOKEN_HTTP_GET_PATHS,
    TOKEN_WEBSOCKET_PATHS,
    TokenClaims,
    is_token,
    token_parse,
)

logger = logging.getLogger(__name__)

Scope = Mapping[str, Any]

_BEARER_RE = re.compile(r"bearer[ \t]+(\S+)", re.IGNORECASE)
_KEY_SUBPROTOCOLS: dict[str, tuple[str, ...]] = {
    Endpoint.TTS: ("veena-api-key.",),
    # The OpenAI SDKs' browser convention (openai-realtime-api-beta lib/api.js).
    Endpoint.ASR: ("openai-insecure-api-key.", "veena-api-key."),
}


@dataclass(frozen=True)
class KeyPrincipal:
    """An authenticated key with its effective limits; holds no raw key and no hash."""

    key_id: UUID
    account_id: int
    version: int
    display: str
    allowed_origins: tuple[str, ...]
    expires_at: datetime | None
    rpm_limit: int
    concurrency_limit: int
    key_rpm_limit: int | None
    key_concurrency_limit: int | None
    max_session_seconds: int
    monthly_tts_characters: int | None
    monthly_asr_seconds: int | None
    allowed_endpoints: tuple[str, ...]


def _header_keys(headers: Iterable[tuple[str, str]]) -> list[str]:
    """Keys from Authorization and X-API-Key, in that order; a malformed one is refused."""
    bearer: list[str] = []
    x_api_key: list[str] = []
    for name, value in headers:
        if name == "authorization":
            match = _BEARER_RE.fullmatch(value.strip())
            if match is None:
                raise AdmissionDenied("invalid_api_key")
            bearer.append(match[1])
        elif name == "x-api-key":
            x_api_key.append(value.strip())
    return bearer + x_api_key


def _subprotocol_keys(subprotocols: Sequence[str], *, endpoint: str) -> list[str]:
    prefixes = _KEY_SUBPROTOCOLS[endpoint]
    return [
        offered[len(prefix) :]
        for offered in subprotocols
        for prefix in prefixes
        if offered.startswith(prefix)
    ]


def _query_keys(values: Sequence[str]) -> list[str]:
    return list(values) if settings.ALLOW_QUERY_API_KEY else []


Credential = ParsedKey | TokenClaims


def _select_credential(
    candidates: Sequence[str], *, from_query: Sequence[str], token_route: bool
) -> Credential:
    """The one credential every source agrees on: a key with a valid shape and checksum
    (K2), or a valid token on a token route that did not come in the query."""
    if not candidates:
        raise MissingApiKey()
    if len(set(candidates)) > 1:
        raise AdmissionDenied("invalid_api_key")
    raw = candidates[0]
    if is_token(raw):
        claims = token_parse(raw) if token_route and not from_query else None
        if claims is None:
            raise AdmissionDenied("invalid_api_key")
        return claims
    parsed = parse_key(raw)
    if parsed is None:
        raise AdmissionDenied("invalid_api_key")
    return parsed


def _scope_credential(scope: Scope, *, endpoint: str) -> Credential:
    assert endpoint in Endpoint.values, endpoint
    headers = [
        (name.decode("latin-1").lower(), value.decode("latin-1"))
        for name, value in scope.get("headers", [])
    ]
    query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
    from_query = _query_keys(query.get("api_key", []))
    return _select_credential(
        _header_keys(headers)
        + _subprotocol_keys(scope.get("subprotocols") or [], endpoint=endpoint)
        + from_query,
        from_query=from_query,
        token_route=scope.get("type") == "websocket"
        and scope.get("path") in TOKEN_WEBSOCKET_PATHS,
    )


def _principal(api_key: ApiKey) -> KeyPrincipal:
    plan = api_key.account.plan
    return KeyPrincipal(
        key_id=api_key.id,
        account_id=api_key.account_id,
        version=api_key.version,
        display=api_key.display,
        allowed_origins=tuple(
            o for o in map(normalize_origin, api_key.allowed_origins) if o is not None
        ),
        expires_at=api_key.expires_at,
        rpm_limit=plan.requests_per_minute,
        concurrency_limit=plan.max_concurrent_streams,
        key_rpm_limit=api_key.rpm_limit,
        key_concurrency_limit=api_key.concurrency_limit,
        max_session_seconds=plan.max_session_seconds,
        monthly_tts_characters=plan.monthly_tts_characters,
        monthly_asr_seconds=plan.monthly_asr_seconds,
        allowed_endpoints=tuple(plan.allowed_endpoints),
    )


def _checked(api_key: ApiKey) -> KeyPrincipal:
    """A4 without the endpoint: the key is live and its account active."""
    if api_key.status != KeyStatus.ACTIVE:
        logger.info("api key %s refused: %s", api_key.id, api_key.status)
        raise AdmissionDenied("invalid_api_key")
    if not api_key.account.is_active:
        logger.info("api key %s refused: account inactive", api_key.id)
        raise AdmissionDenied("invalid_api_key")
    return _principal(api_key)


def check_endpoint(principal: KeyPrincipal, endpoint: str) -> None:
    """A4: the endpoint must be in the plan's ``allowed_endpoints``."""
    if endpoint not in principal.allowed_endpoints:
        raise AdmissionDenied("endpoint_not_allowed")


def is_live(principal: KeyPrincipal) -> bool:
    """False once the key's ``expires_at`` has passed (K7, no grace)."""
    return principal.expires_at is None or principal.expires_at > timezone.now()


def principal_for_key(*, key: ParsedKey, endpoint: str | None) -> KeyPrincipal:
    """Load and check the key by its hash (K5, A4); sync, one query.

    ``endpoint=None`` skips the endpoint check: reads of the account's own usage.
    """
    assert endpoint is None or endpoint in Endpoint.values, endpoint
    key_hash = hash_key(key.raw)
    try:
        api_key = ApiKey.objects.select_related("account__plan").get(key_hash=key_hash)
    except ApiKey.DoesNotExist:
        raise AdmissionDenied("invalid_api_key") from None
    if not hmac.compare_digest(api_key.key_hash, key_hash):
        raise AdmissionDenied("invalid_api_key")
    principal = _checked(api_key)
    if endpoint is not None:
        check_endpoint(principal, endpoint)
    return principal


def principal_for_id(*, key_id: UUID, endpoint: str) -> KeyPrincipal:
    """Reload a known key by id and check it again (E6, E7); sync, one query."""
    try:
        api_key = ApiKey.objects.select_related("account__plan").get(pk=key_id)
    except ApiKey.DoesNotExist:
        raise AdmissionDenied("invalid_api_key") from None
    principal = _checked(api_key)
    check_endpoint(principal, endpoint)
    return principal


def principal_for_token(*, claims: TokenClaims, endpoint: str) -> KeyPrincipal:
    """A token's principal: its playground key checked as a key (A4), for a member still
    in the account, allowed only from the minting page's origin (sync, two queries)."""
    try:
        api_key = ApiKey.objects.select_related("account__plan").get(
            pk=claims.key_id, account_id=claims.account_id, kind=KeyKind.PLAYGROUND
        )
    except ApiKey.DoesNotExist:
        raise AdmissionDenied("invalid_api_key") from None
    principal = _checked(api_key)
    if not playground_member_is_active(
        account_id=claims.account_id, user_id=claims.user_id
    ):
        logger.info(
            "playground token of user %s refused: not an active member of account %s",
            claims.user_id,
            claims.account_id,
        )
        raise AdmissionDenied("invalid_api_key")
    check_endpoint(principal, endpoint)
    return dataclasses.replace(principal, allowed_origins=(claims.origin,))


class PrincipalCache:
    """Principals by key hash, each kept at most ``API_KEY_CACHE_SECONDS`` (A5).

    An entry proves nothing by itself: the caller compares its version with the store's.
    """

    # Keys are few; the bound only stops a flood of distinct valid keys growing memory.
    max_entries = 10_000

    def __init__(self) -> None:
        self._entries: dict[str, tuple[KeyPrincipal, float]] = {}
        self._lock = threading.Lock()

    def get(self, key_hash: str) -> KeyPrincipal | None:
        """The cached principal, or None when absent or older than the cache time."""
        with self._lock:
            entry = self._entries.get(key_hash)
            if entry is None:
                return None
            principal, loaded_at = entry
            if time.monotonic() - loaded_at >= settings.API_KEY_CACHE_SECONDS:
                del self._entries[key_hash]
                return None
            return principal

    def put(self, key_hash: str, principal: KeyPrincipal) -> None:
        """Remember a principal just loaded from the database."""
        with self._lock:
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[key_hash] = (principal, time.monotonic())

    def clear(self) -> None:
        """Forget everything (tests)."""
        with self._lock:
            self._entries.clear()


principal_cache = PrincipalCache()


async def authenticate_websocket(scope: Scope, *, endpoint: str) -> KeyPrincipal:
    """Authenticate a WebSocket scope, or raise AdmissionDenied (A1, A5).

    Shape and checksum are checked before any cache or database access (K2). A cached
    principal costs one store read; a miss or a stale version one query, then the version
    is written to the store (set if higher, so it also seeds a missing value).
    """
    key = _scope_credential(scope, endpoint=endpoint)
    if isinstance(key, TokenClaims):
        return await database_sync_to_async(principal_for_token)(
            claims=key, endpoint=endpoint
        )
    key_hash = hash_key(key.raw)
    limiter = get_limiter()
    cached = principal_cache.get(key_hash)
    if cached is not None and is_live(cached):
        if await in_store(limiter.key_version, cached.key_id) == cached.version:
            check_endpoint(cached, endpoint)
            return cached
    principal = await database_sync_to_async(principal_for_key)(
        key=key, endpoint=endpoint
    )
    stored = await in_store(
        limiter.set_key_version, principal.key_id, principal.version
    )
    # A higher stored version means this read raced a change: use it once, cache it not.
    if stored == principal.version:
        principal_cache.put(key_hash, principal)
    return principal


def authenticate_http(request: HttpRequest, *, endpoint: str | None) -> KeyPrincipal:
    """Authenticate an HTTP request by the A2 sources other than the subprotocol.

    ``endpoint=None`` (the usage API) accepts a key whatever endpoints its plan allows,
    and never a token.
    """
    headers = [
        (name.lower(), value)
        for name, value in request.headers.items()
        if name.lower() in ("authorization", "x-api-key")
    ]
    from_query = _query_keys(request.GET.getlist("api_key"))
    credential = _select_credential(
        _header_keys(headers) + from_query,
        from_query=from_query,
        token_route=endpoint is not None
        and request.method == "GET"
        and request.path_info in TOKEN_HTTP_GET_PATHS,
    )
    if isinstance(credential, TokenClaims):
        assert endpoint is not None
        return principal_for_token(claims=credential, endpoint=endpoint)
    return principal_for_key(key=credential, endpoint=endpoint)
