"""Enforcement at connect and mid-stream (accounts E1–E9, R, C, Q6, A5–A7, K9), on both
limiter backends (memory always; Redis under the ``redis`` marker)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from accounts import auth
from accounts.admission import Admission, admit
from accounts.auth import PrincipalCache
from accounts.exceptions import AdmissionDenied
from accounts.limits import get_limiter
from accounts.models.accounts import Account
from accounts.models.api_keys import ApiKey
from accounts.models.quota import QuotaCounter
from accounts.services.accounts import account_update
from accounts.services.api_keys import api_key_create, api_key_revoke, api_key_update
from accounts.services.quota import period_of
from tests.conftest import free_port

from .conftest import bearer_scope as scope

pytestmark = pytest.mark.django_db(transaction=True)


async def denied(raw: str, endpoint: str = "tts") -> AdmissionDenied:
    with pytest.raises(AdmissionDenied) as info:
        await admit(scope(raw), endpoint=endpoint)
    return info.value


# E1, E2, R1, R4: the order of the pipeline, and giving back.


async def test_e2_concurrency_denials_never_consume_rpm(backend, keyed) -> None:
    _, raw = await keyed({"requests_per_minute": 2, "max_concurrent_streams": 1})
    first = await admit(scope(raw), endpoint="tts")
    for _ in range(100):
        assert (await denied(raw)).reason == "too_many_streams"
    await first.release()
    second = await admit(scope(raw), endpoint="tts")  # the log holds 2 tokens now
    await second.release()
    refused = await denied(raw)
    assert refused.reason == "rate_limited" and refused.retry_after_ms >= 1


async def test_r4_rate_limited_gives_back_the_lease(backend, keyed) -> None:
    api_key, raw = await keyed({"requests_per_minute": 1, "max_concurrent_streams": 1})
    await (await admit(scope(raw), endpoint="asr")).release()
    refused = await denied(raw, "asr")
    assert refused.reason == "rate_limited"
    assert 1 <= refused.retry_after_ms <= 60_000
    # The lease taken before the refused RPM step is free again (E2).
    decision = await database_sync_to_async(get_limiter().acquire_lease)(
        member="probe", account_id=api_key.account_id, account_limit=1, ttl_ms=1000
    )
    assert decision.allowed


async def test_e9_key_caps_apply_to_that_key_only(backend, keyed) -> None:
    capped, capped_raw = await keyed(concurrency_limit=1, rpm_limit=2)
    _, free_raw = await database_sync_to_async(api_key_create)(
        account=await Account.objects.aget(pk=capped.account_id),
        name="free",
        actor=None,
        actor_label="pytest",
    )
    held = await admit(scope(capped_raw), endpoint="tts")
    assert (await denied(capped_raw)).reason == "too_many_streams"
    other = await admit(scope(free_raw), endpoint="tts")
    await held.release()
    await (await admit(scope(capped_raw), endpoint="tts")).release()
    assert (await denied(capped_raw)).reason == "rate_limited"
    await other.release()


async def test_q6_exhausted_quota_refuses_and_gives_everything_back(
    backend, keyed
) -> None:
    api_key, raw = await keyed(
        {
            "monthly_tts_characters": 10,
            "requests_per_minute": 2,
            "max_concurrent_streams": 1,
        }
    )
    await QuotaCounter.objects.acreate(
        account_id=api_key.account_id,
        period=period_of(timezone.now()),
        metric="tts_characters",
        used=10,
    )
    assert (await denied(raw, "tts")).reason == "quota_exceeded"
    # ASR is unlimited on this plan, and the refused TTS connect left its lease and token.
    first = await admit(scope(raw), endpoint="asr")
    await first.release()
    await (await admit(scope(raw), endpoint="asr")).release()
    assert (await denied(raw, "asr")).reason == "rate_limited"


async def test_e4_unreachable_store_denies_limits_unavailable(keyed, settings) -> None:
    _, raw = await keyed()
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    assert (await denied(raw)).reason == "limits_unavailable"


async def test_e5_release_frees_the_lease_once(backend, keyed) -> None:
    _, raw = await keyed({"max_concurrent_streams": 1})
    admission = await admit(scope(raw), endpoint="tts")
    await admission.release()
    await admission.release()
    assert admission.released
    await (await admit(scope(raw), endpoint="tts")).release()


# A5-A7: the principal cache and key versions.


async def test_a5_cached_principal_costs_no_query(backend, keyed, monkeypatch) -> None:
    _, raw = await keyed()
    loads = []
    original = auth.principal_for_key
    monkeypatch.setattr(
        auth, "principal_for_key", lambda **kw: loads.append(1) or original(**kw)
    )
    for _ in range(5):
        await (await admit(scope(raw), endpoint="tts")).release()
    assert len(loads) == 1


async def test_a5_cache_expires_after_api_key_cache_seconds(
    backend, keyed, monkeypatch, settings
) -> None:
    _, raw = await keyed()
    settings.API_KEY_CACHE_SECONDS = 0
    loads = []
    original = auth.principal_for_key
    monkeypatch.setattr(
        auth, "principal_for_key", lambda **kw: loads.append(1) or original(**kw)
    )
    await (await admit(scope(raw), endpoint="tts")).release()
    await (await admit(scope(raw), endpoint="tts")).release()
    assert len(loads) == 2


async def test_a6_revocation_reaches_another_cache_on_the_same_store(
    backend, keyed, monkeypatch
) -> None:
    """Two caches (two processes) on one store; revoke through one, connect through the other."""
    api_key, raw = await keyed()
    other = PrincipalCache()
    mine = auth.principal_cache
    monkeypatch.setattr(auth, "principal_cache", other)
    await (await admit(scope(raw), endpoint="tts")).release()  # cached over there
    monkeypatch.setattr(auth, "principal_cache", mine)
    await (await admit(scope(raw), endpoint="tts")).release()  # and here
    await database_sync_to_async(api_key_revoke)(
        api_key=api_key, actor=None, reason="leaked"
    )
    monkeypatch.setattr(auth, "principal_cache", other)
    assert (await denied(raw)).reason == "invalid_api_key"


async def test_a7_deactivating_the_account_reaches_cached_principals(
    backend, keyed
) -> None:
    api_key, raw = await keyed()
    await (await admit(scope(raw), endpoint="tts")).release()
    account = await Account.objects.aget(pk=api_key.account_id)
    await database_sync_to_async(account_update)(
        account=account, actor=None, actor_label="t", fields={"is_active": False}
    )
    assert (await denied(raw)).reason == "invalid_api_key"


async def test_a5_missing_store_version_is_reseeded_from_the_database(
    backend, keyed, settings
) -> None:
    api_key, raw = await keyed()
    await (await admit(scope(raw), endpoint="tts")).release()
    if backend == "redis":
        import redis

        redis.Redis.from_url(settings.REDIS_URL).flushdb()
    else:
        get_limiter()._values.clear()
    await (await admit(scope(raw), endpoint="tts")).release()
    assert get_limiter().key_version(api_key.id) == 1


# E6-E8: while the stream runs.


async def test_e7_revocation_stops_an_open_stream_at_the_next_check(
    backend, keyed, monkeypatch
) -> None:
    api_key, raw = await keyed()
    admission = await admit(scope(raw), endpoint="asr")
    reloads = []
    original = auth.principal_for_id
    monkeypatch.setattr(
        "accounts.admission.principal_for_id",
        lambda **kw: reloads.append(1) or original(**kw),
    )
    for _ in range(5):
        assert await admission.still_valid()
    assert reloads == []  # an unchanged key costs one store read, no query
    await database_sync_to_async(api_key_revoke)(
        api_key=api_key, actor=None, reason="leaked"
    )
    started = time.monotonic()
    assert not await admission.still_valid()
    assert time.monotonic() - started < 1.0
    assert admission.stop_reason == "key_revoked"
    assert await admission.tick() == "key_revoked"
    await admission.release()


async def test_e7_key_edit_reloads_the_principal_and_continues(backend, keyed) -> None:
    api_key, raw = await keyed()
    admission = await admit(scope(raw), endpoint="tts")
    await database_sync_to_async(api_key_update)(
        api_key=api_key, actor=None, actor_label="t", fields={"rpm_limit": 5}
    )
    assert await admission.still_valid()
    assert admission.principal.version == 2
    assert admission.principal.key_rpm_limit == 5
    await admission.release()


async def test_e6_expired_key_stops_the_stream(backend, keyed) -> None:
    _, raw = await keyed(expires_at=timezone.now() + timedelta(hours=1))
    admission = await admit(scope(raw), endpoint="tts")
    admission.principal = dataclasses.replace(
        admission.principal, expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert not await admission.still_valid()
    assert admission.stop_reason == "key_revoked"


async def test_e6_max_session_duration(backend, keyed) -> None:
    _, raw = await keyed()
    admission = await admit(scope(raw), endpoint="asr")
    assert await admission.tick() is None
    admission.admitted_at -= 600
    assert await admission.tick() == "max_session_duration"


async def test_e8_each_further_request_takes_a_token(backend, keyed) -> None:
    _, raw = await keyed({"requests_per_minute": 2})
    admission = await admit(scope(raw), endpoint="tts")
    await admission.take_request_token()
    with pytest.raises(AdmissionDenied) as info:
        await admission.take_request_token()
    assert info.value.reason == "rate_limited" and info.value.retry_after_ms >= 1
    await admission.release()


async def test_c2_lease_renewal_and_loss(backend, keyed, settings) -> None:
    api_key, raw = await keyed(concurrency_limit=1)
    admission = await admit(scope(raw), endpoint="tts")
    assert await admission.refresh_lease()
    settings.LEASE_RENEW_SECONDS = 0
    assert await admission.tick() is None  # renewed
    await database_sync_to_async(get_limiter().release_lease)(
        member=str(admission.stream_id), account_id=api_key.account_id
    )
    assert not await admission.refresh_lease()
    assert admission.stop_reason == "lease_lost"
    assert await admission.tick() == "lease_lost"
    await admission.release()


async def test_c5_idle_stream_keeps_its_lease(backend, keyed, settings) -> None:
    _, raw = await keyed({"max_concurrent_streams": 1})
    settings.LEASE_TTL_SECONDS = 1.0  # wide enough for a loaded 2-core CI machine
    settings.LEASE_RENEW_SECONDS = 0.2
    admission = await admit(scope(raw), endpoint="tts")
    deadline = time.monotonic() + 2.0  # twice the TTL, renewed by the tick
    while time.monotonic() < deadline:
        assert await admission.tick() is None
        await asyncio.sleep(0.05)
    assert (await denied(raw)).reason == "too_many_streams"
    await admission.release()


async def test_c2_store_outage_keeps_the_lease_until_its_ttl(keyed, settings) -> None:
    _, raw = await keyed()
    admission = await admit(scope(raw), endpoint="tts")
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    assert await admission.still_valid()  # unknown: the lease decides
    assert await admission.refresh_lease()
    admission.renewed_at -= settings.LEASE_TTL_SECONDS
    assert not await admission.refresh_lease()
    assert admission.stop_reason == "lease_lost"


# K9: last_used_at.


async def test_k9_last_used_is_written_off_the_path_once_a_minute(
    backend, keyed
) -> None:
    api_key, raw = await keyed()
    admission = await admit(scope(raw), endpoint="tts")
    assert (await ApiKey.objects.aget(pk=api_key.pk)).last_used_at is None
    await admission.release()
    first = (await ApiKey.objects.aget(pk=api_key.pk)).last_used_at
    assert first is not None
    await (await admit(scope(raw), endpoint="tts")).release()
    assert (await ApiKey.objects.aget(pk=api_key.pk)).last_used_at == first


def test_admission_signatures_are_stable() -> None:
    import inspect

    assert list(inspect.signature(admit).parameters) == [
        "scope",
        "endpoint",
        "stream_id",
    ]
    for name in (
        "release",
        "still_valid",
        "take_request_token",
        "refresh_lease",
        "tick",
    ):
        assert inspect.iscoroutinefunction(getattr(Admission, name))
