"""Authentication (accounts A1–A4, K5, K7): the one credential parser."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from accounts import auth
from accounts.auth import KeyPrincipal, authenticate_http, authenticate_websocket
from accounts.exceptions import AdmissionDenied, MissingApiKey
from accounts.keys import generate_key, hash_key
from accounts.services.accounts import account_update, plan_update
from accounts.services.api_keys import api_key_revoke

pytestmark = pytest.mark.django_db(transaction=True)


def ws_scope(
    *,
    headers: dict[str, str] | None = None,
    subprotocols: list[str] | None = None,
    query: str = "",
) -> dict[str, Any]:
    return {
        "type": "websocket",
        "path": "/v1/realtime",
        "query_string": query.encode(),
        "headers": [
            (k.lower().encode(), v.encode()) for k, v in (headers or {}).items()
        ],
        "subprotocols": subprotocols or [],
    }


async def deny(scope: dict[str, Any], *, endpoint: str = "tts") -> AdmissionDenied:
    with pytest.raises(AdmissionDenied) as info:
        await authenticate_websocket(scope, endpoint=endpoint)
    return info.value


@pytest.fixture
def key(make_key):
    return make_key()


@pytest.fixture
def two_keys(make_key) -> tuple[str, str]:
    return make_key()[1], make_key()[1]


# A2: each source on its own.


@pytest.mark.parametrize(
    "build",
    [
        lambda raw: ws_scope(headers={"Authorization": f"Bearer {raw}"}),
        lambda raw: ws_scope(headers={"Authorization": f"bearer   {raw} "}),
        lambda raw: ws_scope(headers={"X-API-Key": raw}),
        lambda raw: ws_scope(subprotocols=["veena-tts", f"veena-api-key.{raw}"]),
        lambda raw: ws_scope(query=f"api_key={raw}"),
    ],
    ids=["bearer", "bearer-lowercase", "x-api-key", "subprotocol", "query"],
)
async def test_a2_each_source_authenticates(key, build) -> None:
    api_key, raw = key
    principal = await authenticate_websocket(build(raw), endpoint="tts")
    assert principal.key_id == api_key.id
    assert principal.account_id == api_key.account_id


@pytest.mark.parametrize("prefix", ["openai-insecure-api-key.", "veena-api-key."])
async def test_a2_realtime_subprotocols(key, prefix) -> None:
    api_key, raw = key
    scope = ws_scope(subprotocols=["realtime", prefix + raw])
    principal = await authenticate_websocket(scope, endpoint="asr")
    assert principal.key_id == api_key.id


async def test_a2_openai_subprotocol_is_not_a_source_on_tts(key) -> None:
    _, raw = key
    denied = await deny(ws_scope(subprotocols=[f"openai-insecure-api-key.{raw}"]))
    assert isinstance(denied, MissingApiKey)


async def test_a2_query_key_ignored_when_disabled(key, settings) -> None:
    settings.ALLOW_QUERY_API_KEY = False
    _, raw = key
    denied = await deny(ws_scope(query=f"api_key={raw}"))
    assert isinstance(denied, MissingApiKey)
    assert denied.reason == "invalid_api_key"


async def test_a2_no_key_is_invalid_api_key(db) -> None:
    denied = await deny(ws_scope(subprotocols=["veena-tts"]))
    assert isinstance(denied, MissingApiKey)
    assert denied.reason == "invalid_api_key"


async def test_a2_same_key_in_every_source_is_fine(key) -> None:
    api_key, raw = key
    scope = ws_scope(
        headers={"Authorization": f"Bearer {raw}", "X-API-Key": raw},
        subprotocols=[f"veena-api-key.{raw}"],
        query=f"api_key={raw}",
    )
    assert (await authenticate_websocket(scope, endpoint="tts")).key_id == api_key.id


@pytest.mark.parametrize(
    "build",
    [
        lambda a, b: ws_scope(headers={"Authorization": f"Bearer {a}", "X-API-Key": b}),
        lambda a, b: ws_scope(
            headers={"X-API-Key": a}, subprotocols=[f"veena-api-key.{b}"]
        ),
        lambda a, b: ws_scope(
            headers={"Authorization": f"Bearer {a}"}, query=f"api_key={b}"
        ),
        lambda a, b: ws_scope(
            subprotocols=[f"veena-api-key.{a}", f"veena-api-key.{b}"]
        ),
        lambda a, b: ws_scope(query=f"api_key={a}&api_key={b}"),
    ],
)
async def test_a2_two_different_keys_are_refused(two_keys, build) -> None:
    first, second = two_keys
    denied = await deny(build(first, second))
    assert denied.reason == "invalid_api_key"
    assert not isinstance(denied, MissingApiKey)


@pytest.mark.parametrize(
    "authorization", ["Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "Token {raw}", "{raw}"]
)
async def test_a2_malformed_authorization_is_refused(key, authorization) -> None:
    _, raw = key
    scope = ws_scope(
        headers={"Authorization": authorization.format(raw=raw), "X-API-Key": raw}
    )
    assert (await deny(scope)).reason == "invalid_api_key"


async def test_k2_malformed_key_never_reaches_the_database(key, monkeypatch) -> None:
    _, raw = key

    def fail(**kwargs: Any) -> KeyPrincipal:
        raise AssertionError("database lookup for a malformed key")

    monkeypatch.setattr(auth, "principal_for_key", fail)
    for bad in (
        raw[:-1] + ("A" if raw[-1] != "A" else "B"),
        "vk_test_short",
        raw + "x",
    ):
        scope = ws_scope(headers={"Authorization": f"Bearer {bad}"})
        assert (await deny(scope)).reason == "invalid_api_key"


# A4: validity of the key and its account.


async def test_a4_unknown_key_is_refused(db) -> None:
    raw = generate_key("vk_test_")
    scope = ws_scope(headers={"Authorization": f"Bearer {raw}"})
    assert (await deny(scope)).reason == "invalid_api_key"


async def test_a4_revoked_key_is_refused(key) -> None:
    api_key, raw = key
    await auth.database_sync_to_async(api_key_revoke)(
        api_key=api_key, actor=None, reason="test"
    )
    scope = ws_scope(headers={"X-API-Key": raw})
    assert (await deny(scope)).reason == "invalid_api_key"


@pytest.mark.parametrize("offset", [timedelta(seconds=-1), timedelta(0)])
def test_k7_expired_key_is_refused_without_grace(make_key, rf, offset) -> None:
    api_key, raw = make_key()
    api_key.expires_at = timezone.now() + offset
    api_key.save(update_fields=["expires_at"])
    with pytest.raises(AdmissionDenied) as info:
        authenticate_http(rf.get("/", HTTP_X_API_KEY=raw), endpoint="tts")
    assert info.value.reason == "invalid_api_key"


def test_k7_key_expiring_later_is_accepted(make_key, rf) -> None:
    api_key, raw = make_key(expires_at=timezone.now() + timedelta(minutes=5))
    principal = authenticate_http(rf.get("/", HTTP_X_API_KEY=raw), endpoint="tts")
    assert principal.expires_at == api_key.expires_at


def test_a4_inactive_account_is_refused(make_key, account, rf) -> None:
    _, raw = make_key()
    account_update(
        account=account, actor=None, actor_label="t", fields={"is_active": False}
    )
    with pytest.raises(AdmissionDenied) as info:
        authenticate_http(rf.get("/", HTTP_X_API_KEY=raw), endpoint="tts")
    assert info.value.reason == "invalid_api_key"


async def test_a4_endpoint_not_in_plan_is_refused(key, plan) -> None:
    _, raw = key
    await auth.database_sync_to_async(plan_update)(
        plan=plan, actor=None, actor_label="t", fields={"allowed_endpoints": ["tts"]}
    )
    scope = ws_scope(subprotocols=["realtime", f"openai-insecure-api-key.{raw}"])
    assert (await deny(scope, endpoint="asr")).reason == "endpoint_not_allowed"
    assert await authenticate_websocket(
        ws_scope(headers={"X-API-Key": raw}), endpoint="tts"
    )


# A1: the principal.


def test_a1_principal_has_effective_limits_and_no_secret(make_key, plan, rf) -> None:
    api_key, raw = make_key(
        rpm_limit=5, concurrency_limit=2, allowed_origins=["https://app.example.com"]
    )
    principal = authenticate_http(
        rf.get("/", HTTP_AUTHORIZATION=f"Bearer {raw}"), endpoint="tts"
    )
    assert principal == KeyPrincipal(
        key_id=api_key.id,
        account_id=api_key.account_id,
        version=1,
        display=api_key.display,
        allowed_origins=("https://app.example.com",),
        expires_at=None,
        rpm_limit=plan.requests_per_minute,
        concurrency_limit=plan.max_concurrent_streams,
        key_rpm_limit=5,
        key_concurrency_limit=2,
        max_session_seconds=plan.max_session_seconds,
        monthly_tts_characters=None,
        monthly_asr_seconds=None,
        allowed_endpoints=("tts", "asr"),
    )
    values = repr(dataclasses.astuple(principal))
    assert raw not in values and hash_key(raw) not in values
    with pytest.raises(dataclasses.FrozenInstanceError):
        principal.version = 2  # type: ignore[misc]


def test_k5_valid_key_costs_two_queries(
    make_key, rf, django_assert_num_queries
) -> None:
    """One by the key's hash (K5), one for its account's quota overrides (issue 32)."""
    _, raw = make_key()
    with django_assert_num_queries(2):
        authenticate_http(rf.get("/", HTTP_X_API_KEY=raw), endpoint="asr")


@pytest.mark.parametrize(
    "meta",
    [
        lambda raw: {"HTTP_AUTHORIZATION": f"Bearer {raw}"},
        lambda raw: {"HTTP_X_API_KEY": raw},
        lambda raw: {"QUERY_STRING": f"api_key={raw}"},
    ],
    ids=["bearer", "x-api-key", "query"],
)
def test_a2_http_sources(make_key, rf, meta) -> None:
    api_key, raw = make_key()
    request = rf.get("/v1/tts/speakers", **meta(raw))
    assert authenticate_http(request, endpoint="tts").key_id == api_key.id


def test_a2_http_two_different_keys_are_refused(make_key, rf) -> None:
    _, first = make_key()
    _, second = make_key()
    request = rf.get(f"/?api_key={second}", HTTP_AUTHORIZATION=f"Bearer {first}")
    with pytest.raises(AdmissionDenied) as info:
        authenticate_http(request, endpoint="tts")
    assert info.value.reason == "invalid_api_key"


def test_s10_denial_carries_no_key(make_key, rf) -> None:
    api_key, raw = make_key()
    api_key_revoke(api_key=api_key, actor=None, reason="test")
    with pytest.raises(AdmissionDenied) as info:
        authenticate_http(rf.get("/", HTTP_X_API_KEY=raw), endpoint="tts")
    assert str(info.value) == "invalid_api_key"
    assert raw not in repr(info.value.args)
