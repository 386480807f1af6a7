"""The only code that reads API credentials (accounts A1–A5).

Sources, in order of precedence (A2): ``Authorization: Bearer``, ``X-API-Key``, the subprotocol
``veena-api-key.<key>`` (on ``asr`` also ``openai-insecure-api-key.<key>``), and ``?api_key=``
while ``ALLOW_QUERY_API_KEY`` is on. All sources that carry a key must carry the same one.

WebSocket principals are cached per process by key hash for ``API_KEY_CACHE_SECONDS`` and
used only while their version equals the limits store's ``apikey:<id>:v`` (A5), which every
key change writes on commit: a revocation reaches every process at its next lookup.

Client secrets (``accounts.client_secrets``, ``ek_…``) travel in the same sources, query
included, and open only the WebSocket upgrade of their use's route (``/v1/realtime`` or
``/v1/tts/ws``); everywhere else, REST included, they are refused as a bad key is. A
valid secret authenticates as the key that minted it, checked like any key at every
connect (A4): a revoked key, an inactive account, an expired secret, or a playground
member no longer in the account gets ``invalid_api_key``. Its principal carries the
secret's session configuration and its origin rule (``principal_for_secret``). Secret
principals are not cached: each connect reads the database, so a revocation in any
process refuses every secret of the key at the next connect.
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

from accounts.client_secrets import (
    SECRET_PATHS,
    ParsedSecret,
    is_client_secret,
    parse_secret,
)
from accounts.exceptions import AdmissionDenied, MissingApiKey
from accounts.keys import ParsedKey, hash_key, parse_key
from accounts.limits import get_limiter, in_store
from accounts.models.api_keys import ApiKey
from accounts.models.choices import Endpoint, KeyStatus
from accounts.models.client_secrets import ClientSecret
from accounts.origins import ANY_ORIGIN, normalize_origin
from accounts.quota_limits import QuotaWindow
from accounts.selectors import playground_member_is_active
from accounts.selectors.quota import quota_windows

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
    # The account's quota overrides and top-ups, in effect or to come, when it was loaded:
    # admission computes the limit of the moment from them (accounts.quota_limits).
    quota_windows: tuple[QuotaWindow, ...] = ()
    # A client secret's: its id and the session configuration applied at connect.
    secret_id: UUID | None = None
    secret_session: dict[str, Any] | None = None


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


Credential = ParsedKey | ParsedSecret
# The use of the client secrets each WebSocket route admits (its upgrade only).
_SECRET_USES = {path: use for use, path in SECRET_PATHS.items()}


def _select_credential(
    candidates: Sequence[str], *, secret_use: str | None
) -> Credential:
    """The one credential every source agrees on: a key with a valid shape and checksum
    (K2), or a client secret of a valid shape where ``secret_use`` admits one."""
    if not candidates:
        raise MissingApiKey()
    if len(set(candidates)) > 1:
        raise AdmissionDenied("invalid_api_key")
    raw = candidates[0]
    parsed: Credential | None
    if is_client_secret(raw):
        parsed = parse_secret(raw) if secret_use is not None else None
    else:
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
    websocket = scope.get("type") == "websocket"
    return _select_credential(
        _header_keys(headers)
        + _subprotocol_keys(scope.get("subprotocols") or [], endpoint=endpoint)
        + _query_keys(query.get("api_key", [])),
        secret_use=_SECRET_USES.get(scope.get("path", "")) if websocket else None,
    )


def _principal(api_key: ApiKey) -> KeyPrincipal:
    plan = api_key.account.plan
    windows = quota_windows(account_id=api_key.account_id, now=timezone.now())
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
        quota_windows=windows,
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
    """Load and check the key by its hash (K5, A4); sync, one query, and one more for the
    account's quota overrides once the key is valid.

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
    """Reload a known key by id and check it again (E6, E7); sync, two queries."""
    try:
        api_key = ApiKey.objects.select_related("account__plan").get(pk=key_id)
    except ApiKey.DoesNotExist:
        raise AdmissionDenied("invalid_api_key") from None
    principal = _checked(api_key)
    check_endpoint(principal, endpoint)
    return principal


def principal_for_secret(
    *, secret: ParsedSecret, path: str, endpoint: str
) -> KeyPrincipal:
    """A client secret's principal (sync, one query; two for a playground member's).

    Its key checked as a key (A4), with the secret's session configuration, and as
    allowed origins: the secret's own origin when it was bound to one (the playground),
    else the key's, else any (a secret is minted for a browser: accounts S13's empty
    list means "no browser" for the key itself).
    """
    digest = hash_key(secret.raw)
    try:
        row = ClientSecret.objects.select_related("api_key__account__plan").get(
            secret_hash=digest
        )
    except ClientSecret.DoesNotExist:
        raise AdmissionDenied("invalid_api_key") from None
    if not hmac.compare_digest(row.secret_hash, digest):  # S11, as for keys
        raise AdmissionDenied("invalid_api_key")
    if SECRET_PATHS[row.use] != path or row.expired:
        logger.info("client secret %s refused: expired or off its route", row.id)
        raise AdmissionDenied("invalid_api_key")
    principal = _checked(row.api_key)
    if row.created_by_id is not None and not playground_member_is_active(
        account_id=principal.account_id, user_id=row.created_by_id
    ):
        logger.info("client secret %s refused: its member left the account", row.id)
        raise AdmissionDenied("invalid_api_key")
    check_endpoint(principal, endpoint)
    origins = (row.origin,) if row.origin else principal.allowed_origins
    return dataclasses.replace(
        principal,
        allowed_origins=origins or (ANY_ORIGIN,),
        secret_id=row.id,
        secret_session=dict(row.session),
    )


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
    if isinstance(key, ParsedSecret):
        return await database_sync_to_async(principal_for_secret)(
            secret=key, path=scope["path"], endpoint=endpoint
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

    ``endpoint=None`` (the usage API) accepts a key whatever endpoints its plan allows.
    A client secret is never accepted over HTTP.
    """
    headers = [
        (name.lower(), value)
        for name, value in request.headers.items()
        if name.lower() in ("authorization", "x-api-key")
    ]
    credential = _select_credential(
        _header_keys(headers) + _query_keys(request.GET.getlist("api_key")),
        secret_use=None,
    )
    assert isinstance(credential, ParsedKey)
    return principal_for_key(key=credential, endpoint=endpoint)
