"""Admission at connect and enforcement while a stream runs (accounts §5).

``admit()`` runs the E1 pipeline: authenticate → origin (only when the client sent
``Origin``) → concurrency lease → requests-per-minute token → quota. When a step fails, what
the earlier steps took is given back before the denial is raised (E2). The returned
``Admission`` is what the stream then holds:

* ``await admission.tick()`` at least once a second (``accounts.metering.stream_tick`` does it
  together with the meter): it re-checks the key (``still_valid``), renews the lease every
  ``LEASE_RENEW_SECONDS`` (``refresh_lease``) and ends the stream at ``max_session_seconds``.
  A non-None result is the E7 stop reason.
* ``await admission.take_request_token()`` before each TTS request after the first (E8).
* ``await admission.release()`` in ``disconnect()`` and in a ``finally`` (E5), after the
  usage record is finished.

Every limits-store call runs in a thread; an unreachable store raises
``AdmissionDenied("limits_unavailable")`` (E4).
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import HttpRequest
from django.utils import timezone

from accounts.auth import (
    KeyPrincipal,
    Scope,
    authenticate_http,
    authenticate_websocket,
    is_live,
    principal_for_id,
)
from accounts.exceptions import AdmissionDenied, DenialReason, DeniedKey, StreamCap
from accounts.limits import get_limiter, in_store
from accounts.models.choices import Endpoint
from accounts.origins import ANY_ORIGIN, normalize_origin
from accounts.quota_mirror import quota_limit, quota_metric, reserve_quota
from accounts.refusals import auth_failures_counted
from accounts.services.api_keys import LAST_USED_RESOLUTION, api_key_touch
from accounts.services.quota import period_of
from gateway.outages import log_failure

logger = logging.getLogger(__name__)

# K9: when this process last wrote last_used_at for a key (monotonic seconds).
_touched: dict[uuid.UUID, float] = {}


def lease_ttl_ms() -> int:
    """``LEASE_TTL_SECONDS`` in milliseconds (C1)."""
    return int(settings.LEASE_TTL_SECONDS * 1000)


@dataclass
class Admission:
    """What a stream holds while it is open: its principal, lease and RPM token."""

    principal: KeyPrincipal
    stream_id: uuid.UUID = field(default_factory=uuid.uuid4)
    endpoint: str = Endpoint.TTS
    # The scope type it was admitted on: "websocket", or "http" for REST (usage routes).
    transport: str = "websocket"
    released: bool = field(default=False, init=False)
    # Set when still_valid(), refresh_lease() or tick() ends the stream (E7).
    stop_reason: DenialReason | None = field(default=None, init=False)
    admitted_at: float = field(default_factory=time.monotonic, init=False)
    # The key whose own lease set holds the stream, when the key has a cap (E9).
    lease_key_id: uuid.UUID | None = field(default=None, init=False)
    lease_held: bool = field(default=False, init=False)
    renewed_at: float = field(default_factory=time.monotonic, init=False)

    @property
    def session_expired(self) -> bool:
        """True once the stream is ``max_session_seconds`` old (E6 step 4)."""
        age = time.monotonic() - self.admitted_at
        return age >= self.principal.max_session_seconds

    async def still_valid(self) -> bool:
        """Whether the key may still serve this stream (E6, E7): one store GET.

        The database is read only when the key's version in the store has changed (or is
        missing); a revoked, expired or otherwise refused key returns False and sets
        ``stop_reason = "key_revoked"``. An unreachable store returns True: the lease renewal
        decides then (C2).
        """
        if self.released or self.stop_reason is not None:
            return False
        if not is_live(self.principal):
            logger.info("api key %s expired mid-stream", self.principal.key_id)
            self.stop_reason = "key_revoked"
            return False
        limiter = get_limiter()
        try:
            version = await in_store(limiter.key_version, self.principal.key_id)
        except AdmissionDenied:
            return True
        if version == self.principal.version:
            return True
        try:
            principal = await database_sync_to_async(principal_for_id)(
                key_id=self.principal.key_id, endpoint=self.endpoint
            )
        except AdmissionDenied:
            logger.info("api key %s refused mid-stream", self.principal.key_id)
            self.stop_reason = "key_revoked"
            return False
        except DatabaseError:  # the database is down: the key stays as last verified
            log_failure(logger, "api key %s: reload failed", self.principal.key_id)
            return True
        self.principal = principal
        try:
            await in_store(limiter.set_key_version, principal.key_id, principal.version)
        except AdmissionDenied:
            pass
        return True

    async def take_request_token(self) -> None:
        """Take one more RPM token for a further request on this stream (E8, R1).

        Raises ``AdmissionDenied("rate_limited", retry_after_ms=…)`` when the account's or
        the key's log is full, ``AdmissionDenied("limits_unavailable")`` when the store is
        unreachable.
        """
        await self._take_token(uuid.uuid4().hex)

    async def _take_token(self, token: str) -> uuid.UUID | None:
        """Take ``token`` from the account's log (and the key's, E9); the key id used.

        Raises ``AdmissionDenied("rate_limited", retry_after_ms=…)`` when a log is full.
        """
        p = self.principal
        rpm_key = p.key_id if p.key_rpm_limit is not None else None
        decision = await in_store(
            get_limiter().take_request,
            member=token,
            account_id=p.account_id,
            account_limit=p.rpm_limit,
            key_id=rpm_key,
            key_limit=p.key_rpm_limit,
        )
        if not decision.allowed:
            raise AdmissionDenied(
                "rate_limited", retry_after_ms=decision.retry_after_ms
            )
        return rpm_key

    async def refresh_lease(self) -> bool:
        """Renew the lease for ``LEASE_TTL_SECONDS`` (C2); False means it is lost.

        While the store is unreachable the lease counts as held until its TTL has run out
        since the last successful renewal.
        """
        if self.released or not self.lease_held:
            return False
        try:
            renewed = await in_store(
                get_limiter().renew_lease,
                member=str(self.stream_id),
                account_id=self.principal.account_id,
                ttl_ms=lease_ttl_ms(),
                key_id=self.lease_key_id,
            )
        except AdmissionDenied:
            held = time.monotonic() - self.renewed_at < settings.LEASE_TTL_SECONDS
            if not held:
                self.stop_reason = "lease_lost"
            return held
        if renewed:
            self.renewed_at = time.monotonic()
        else:
            logger.warning("stream %s lost its lease", self.stream_id)
            self.lease_held = False
            self.stop_reason = "lease_lost"
        return renewed

    async def tick(self) -> DenialReason | None:
        """E6 for the stream: key check, lease renewal when due, maximum duration.

        Call it at least once a second; a non-None result is the reason to stop (E7).
        """
        if not await self.still_valid():
            return self.stop_reason or "key_revoked"
        if self.session_expired:
            self.stop_reason = "max_session_duration"
            return self.stop_reason
        due = time.monotonic() - self.renewed_at >= settings.LEASE_RENEW_SECONDS
        if due and not await self.refresh_lease():
            return "lease_lost"
        return None

    async def release(self) -> None:
        """Give back the lease; calling it again does nothing (E5, C3)."""
        if self.released:
            return
        self.released = True
        if self.lease_held:
            self.lease_held = False
            await _give_back_lease(self)
        await self._touch_key()

    async def _touch_key(self) -> None:
        """K9, off the admission path: at most one conditional UPDATE a minute."""
        key_id = self.principal.key_id
        now = time.monotonic()
        if now - _touched.get(key_id, -1e9) < LAST_USED_RESOLUTION.total_seconds():
            return
        _touched[key_id] = now
        try:
            await database_sync_to_async(api_key_touch)(
                key_id=key_id, now=timezone.now()
            )
        except DatabaseError:
            logger.warning("api key %s: last_used_at not written", key_id)

    async def _acquire(self) -> None:
        """Steps 3–5 of E1; on a failure, give back what was taken first (E2)."""
        p = self.principal
        limiter = get_limiter()
        lease_key = p.key_id if p.key_concurrency_limit is not None else None
        decision = await in_store(
            limiter.acquire_lease,
            member=str(self.stream_id),
            account_id=p.account_id,
            account_limit=p.concurrency_limit,
            ttl_ms=lease_ttl_ms(),
            key_id=lease_key,
            key_limit=p.key_concurrency_limit,
        )
        if not decision.allowed:
            cap = StreamCap(decision.limit, per_key=decision.key_cap)
            raise AdmissionDenied("too_many_streams", cap=cap)
        self.lease_key_id, self.lease_held = lease_key, True
        self.renewed_at = time.monotonic()
        admitted = False
        try:
            token = uuid.uuid4().hex
            rpm_key = await self._take_token(token)
            try:
                await self._check_quota()
            except AdmissionDenied:
                await _refund(token, account_id=p.account_id, key_id=rpm_key)
                raise
            admitted = True
        finally:
            if not admitted:
                self.released = True
                self.lease_held = False
                await _give_back_lease(self)

    async def _check_quota(self) -> None:
        """Q6: at least one unit of the endpoint's metric must remain."""
        metric = quota_metric(self.endpoint)
        limit = quota_limit(self.principal, metric)
        if limit is None:
            return
        grant = await reserve_quota(
            account_id=self.principal.account_id,
            metric=metric,
            period=period_of(timezone.now()),
            amount=0,
            limit=limit,
            partial=True,
        )
        if grant.remaining is not None and grant.remaining < 1:
            raise AdmissionDenied("quota_exceeded")


async def _refund(token: str, *, account_id: int, key_id: uuid.UUID | None) -> None:
    try:
        await in_store(
            get_limiter().refund_request,
            member=token,
            account_id=account_id,
            key_id=key_id,
        )
    except AdmissionDenied:
        logger.warning("account %s: request token not refunded", account_id)


async def _give_back_lease(admission: Admission) -> None:
    try:
        await in_store(
            get_limiter().release_lease,
            member=str(admission.stream_id),
            account_id=admission.principal.account_id,
            key_id=admission.lease_key_id,
        )
    except AdmissionDenied:
        logger.warning("stream %s: lease left to expire", admission.stream_id)


def scope_origin(scope: Scope) -> str | None:
    """The raw ``Origin`` header of a scope, or None when the client sent none."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"origin":
            return str(value.decode("latin-1"))
    return None


def check_origin(principal: KeyPrincipal, origin: str | None) -> None:
    """S13: without Origin, pass; with one, it must equal an allowed origin (any, for a
    client secret of a key that lists none)."""
    if origin is None or ANY_ORIGIN in principal.allowed_origins:
        return
    normalized = normalize_origin(origin)
    if normalized is None or normalized not in principal.allowed_origins:
        raise AdmissionDenied("origin_not_allowed")


def authenticate_request(request: HttpRequest, *, endpoint: str | None) -> KeyPrincipal:
    """Authenticate and origin-check an HTTP request without taking any limit (sync).

    For endpoints that are not metered (``GET /v1/tts/speakers``, tts H6), so ``tts`` and
    ``asr`` need not import ``accounts.auth`` (accounts L2). ``endpoint=None`` (``GET
    /v1/models``) accepts a key whatever endpoints its plan allows; no route over HTTP
    accepts a client secret.
    """
    with auth_failures_counted(endpoint=endpoint or ""):
        principal = authenticate_http(request, endpoint=endpoint)
    check_origin(principal, request.headers.get("Origin"))
    return principal


async def _acquire_for_key(admission: Admission, scope: Scope) -> None:
    """Check the origin and take the limits of a known key; a refusal carries the key,
    whose usage it is (issue 30), and gives back what was taken (E2)."""
    principal = admission.principal
    try:
        check_origin(principal, scope_origin(scope))
        await admission._acquire()
    except AdmissionDenied as denied:  # the key's refusal: its caller records it
        denied.key = DeniedKey(principal.account_id, principal.key_id)
        raise


async def admit(
    scope: Scope, *, endpoint: str, stream_id: uuid.UUID | None = None
) -> Admission:
    """Admit one stream on ``endpoint`` or raise AdmissionDenied (E1, E2).

    The reason is one of ``invalid_api_key``, ``origin_not_allowed``,
    ``endpoint_not_allowed``, ``too_many_streams``, ``rate_limited`` (with
    ``retry_after_ms``), ``quota_exceeded``, ``limits_unavailable`` or
    ``service_unavailable`` (the database did not answer: refused, never a 1011).
    """
    try:
        with auth_failures_counted(endpoint=endpoint):
            principal = await authenticate_websocket(scope, endpoint=endpoint)
        admission = Admission(
            principal=principal,
            stream_id=stream_id or uuid.uuid4(),
            endpoint=endpoint,
            transport=str(scope.get("type", "websocket")),
        )
        await _acquire_for_key(admission, scope)
    except (OperationalError, InterfaceError):
        log_failure(logger, "admission on %s refused", endpoint)
        raise AdmissionDenied("service_unavailable") from None
    return admission


async def admit_request(request: HttpRequest, *, endpoint: str) -> Admission:
    """``admit()`` for one HTTP request: its headers and query as the scope, no
    subprotocol (tts H1, W2); a metered REST route holds the admission to its end."""
    scope: Scope = {
        "type": "http",
        "headers": [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in request.headers.items()
        ],
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "subprotocols": [],
    }
    return await admit(scope, endpoint=endpoint)
