"""Playground tokens (accounts.tokens) and the one credential parser that accepts them.

A token authenticates as its account's playground key, only on the playground's routes,
only from the headers or the browser subprotocols, and only while it has not expired and
key, account and member are still good; every refusal is the bad-key refusal.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.core import signing
from django.test import Client, RequestFactory

from accounts.auth import authenticate_http, authenticate_websocket
from accounts.exceptions import AdmissionDenied
from accounts.keys import parse_key
from accounts.tokens import TOKEN_PREFIX, token_parse, token_sign
from gateway.logs import redact
from veena_site.asgi import application

ORIGIN = "http://testserver"
# RFC 7230 tchar: what a WebSocket subprotocol may contain (RFC 6455 4.1).
SUBPROTOCOL_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
KEY_SHAPED = re.compile(r"vk_[a-z]+_[0-9A-Za-z]{20,}")


def claims(**overrides: Any) -> dict[str, Any]:
    values = {
        "account_id": 7,
        "key_id": uuid.uuid4(),
        "user_id": 3,
        "origin": ORIGIN,
        "expires_at": time.time() + 60,
    }
    return {**values, **overrides}


# The token itself: pure functions.


def test_a_token_round_trips_its_claims_and_is_unique() -> None:
    values = claims()
    token = token_sign(**values)
    parsed = token_parse(token)
    assert parsed is not None
    assert (parsed.account_id, parsed.key_id, parsed.user_id, parsed.origin) == (
        values["account_id"],
        values["key_id"],
        values["user_id"],
        ORIGIN,
    )
    assert token != token_sign(**values)  # a nonce in every token
    assert token not in repr(parsed)


def test_a_token_is_a_legal_subprotocol_and_nothing_like_a_key() -> None:
    token = token_sign(**claims(origin="https://speech.example.com:8443"))
    assert token.startswith(TOKEN_PREFIX)
    assert SUBPROTOCOL_TOKEN.fullmatch("veena-api-key." + token)
    assert parse_key(token) is None and not KEY_SHAPED.search(token)
    assert redact(f"offered veena-tts, {token}") == "offered veena-tts, [REDACTED]"


def test_an_expired_token_is_refused() -> None:
    token = token_sign(**claims(expires_at=1_000_000))
    assert token_parse(token, now=999_999) is not None
    assert token_parse(token, now=1_000_000) is None
    assert token_parse(token) is None


def test_a_forged_or_foreign_signed_value_is_refused() -> None:
    token = token_sign(**claims())
    value, signature = token[len(TOKEN_PREFIX) :].rsplit(".", 1)
    payload = signing.b64_decode(value.encode())
    forged = signing.b64_encode(payload.replace(b'"a":7', b'"a":8')).decode()
    assert token_parse(f"{TOKEN_PREFIX}{forged}.{signature}") is None
    assert token_parse(f"{TOKEN_PREFIX}{value}.{signature[:-2]}AA") is None
    # Signed by this site for another purpose (another salt): not a token.
    other = signing.Signer(sep=".").sign_object(json.loads(payload))
    assert token_parse(TOKEN_PREFIX + other) is None
    assert token_parse(TOKEN_PREFIX + "x" * 600) is None
    assert token_parse(token[len(TOKEN_PREFIX) :]) is None


# Through accounts.auth, against the database.


@dataclass
class Playground:
    account: Any
    user: Any
    token: str

    @property
    def key(self) -> Any:
        from accounts.models.api_keys import ApiKey
        from accounts.models.choices import KeyKind

        return ApiKey.objects.get(account=self.account, kind=KeyKind.PLAYGROUND)


def make_playground(plan: dict[str, Any] | None = None, **mint: Any) -> Playground:
    from django.contrib.auth.models import User

    from accounts.models.accounts import Account
    from accounts.models.plans import Plan
    from accounts.services.playground import playground_token_mint

    name = f"pg-{uuid.uuid4().hex[:8]}"
    values = {
        "requests_per_minute": 100,
        "max_concurrent_streams": 4,
        "max_session_seconds": 600,
        **(plan or {}),
    }
    account = Account.objects.create(
        name=name, slug=name, plan=Plan.objects.create(name=name, **values)
    )
    user = User.objects.create_user(name, password="pw")
    account.members.add(user)
    minted = playground_token_mint(account=account, user=user, origin=ORIGIN, **mint)
    return Playground(account=account, user=user, token=minted.token)


@pytest.fixture
def playground(transactional_db: None) -> Playground:
    return make_playground()


def ws_scope(
    path: str,
    *,
    subprotocols: list[str] | None = None,
    headers: dict[str, str] | None = None,
    query: str = "",
    kind: str = "websocket",
) -> dict[str, Any]:
    return {
        "type": kind,
        "path": path,
        "query_string": query.encode(),
        "headers": [
            (k.lower().encode(), v.encode()) for k, v in (headers or {}).items()
        ],
        "subprotocols": subprotocols or [],
    }


async def refusal(scope: dict[str, Any], endpoint: str) -> str:
    with pytest.raises(AdmissionDenied) as info:
        await authenticate_websocket(scope, endpoint=endpoint)
    return info.value.reason


@pytest.mark.parametrize(
    ("path", "endpoint", "source"),
    [
        ("/v1/tts/ws", "tts", "veena-api-key."),
        ("/v1/realtime", "asr", "openai-insecure-api-key."),
        ("/v1/realtime", "asr", "veena-api-key."),
        ("/v1/tts/ws", "tts", "bearer"),
    ],
)
async def test_a_token_authenticates_as_the_playground_key_on_both_sockets(
    playground: Playground, path: str, endpoint: str, source: str
) -> None:
    token = playground.token
    if source == "bearer":
        scope = ws_scope(path, headers={"Authorization": f"Bearer {token}"})
    else:
        scope = ws_scope(path, subprotocols=["realtime", source + token])
    principal = await authenticate_websocket(scope, endpoint=endpoint)
    key = await database_sync_to_async(lambda: playground.key)()
    assert principal.key_id == key.id and principal.account_id == playground.account.id
    assert principal.display == "playground"
    assert principal.allowed_origins == (ORIGIN,)  # only the page that minted it


async def test_a_token_is_refused_off_the_playground_routes_and_in_the_query(
    playground: Playground, api_key: str
) -> None:
    token = playground.token
    protocols = ["veena-tts", f"veena-api-key.{token}"]
    # POST /v1/tts (admitted with an http scope), an unknown socket, the query string.
    assert await refusal(
        ws_scope("/v1/tts", kind="http", subprotocols=protocols), "tts"
    )
    assert await refusal(ws_scope("/v1/other", subprotocols=protocols), "tts")
    assert (
        await refusal(ws_scope("/v1/tts/ws", query=f"api_key={token}"), "tts")
        == "invalid_api_key"
    )
    both = ws_scope(
        "/v1/tts/ws", subprotocols=protocols, headers={"X-API-Key": api_key}
    )
    assert await refusal(both, "tts") == "invalid_api_key"


def _expire(p: Playground) -> None:
    from accounts.services.playground import playground_token_mint

    p.token = playground_token_mint(
        account=p.account, user=p.user, origin=ORIGIN, now=time.time() - 3600
    ).token


def _revoke_key(p: Playground) -> None:
    from accounts.services.api_keys import api_key_revoke

    api_key_revoke(api_key=p.key, actor=None, reason="test")


def _remove_member(p: Playground) -> None:
    p.account.members.remove(p.user)


def _deactivate_user(p: Playground) -> None:
    p.user.is_active = False
    p.user.save(update_fields=["is_active"])


def _deactivate_account(p: Playground) -> None:
    from accounts.services.accounts import account_update

    account_update(
        account=p.account, actor=None, actor_label="test", fields={"is_active": False}
    )


@pytest.mark.parametrize(
    "change",
    [_expire, _revoke_key, _remove_member, _deactivate_user, _deactivate_account],
    ids=[
        "expired",
        "key-revoked",
        "member-removed",
        "user-inactive",
        "account-inactive",
    ],
)
async def test_a_token_is_refused_like_a_bad_key_once_its_backing_is_gone(
    playground: Playground, change: Any
) -> None:
    scope = lambda: ws_scope(  # noqa: E731
        "/v1/tts/ws", subprotocols=["veena-tts", f"veena-api-key.{playground.token}"]
    )
    await authenticate_websocket(scope(), endpoint="tts")
    await database_sync_to_async(change)(playground)
    assert await refusal(scope(), "tts") == "invalid_api_key"


async def test_a_token_still_obeys_the_plans_endpoints(transactional_db: None) -> None:
    p = await database_sync_to_async(make_playground)({"allowed_endpoints": ["tts"]})
    scope = ws_scope("/v1/realtime", subprotocols=[f"veena-api-key.{p.token}"])
    assert await refusal(scope, "asr") == "endpoint_not_allowed"


def test_over_http_a_token_opens_only_get_speakers(playground: Playground) -> None:
    rf = RequestFactory()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {playground.token}"}
    principal = authenticate_http(rf.get("/v1/tts/speakers", **auth), endpoint="tts")
    assert principal.key_id == playground.key.id
    for request, endpoint in (
        (rf.post("/v1/tts/speakers", **auth), "tts"),
        (rf.get("/v1/tts", **auth), "tts"),
        (rf.get("/v1/organization/usage/audio_speeches", **auth), None),
    ):
        with pytest.raises(AdmissionDenied):
            authenticate_http(request, endpoint=endpoint)
    client = Client()
    assert client.get("/v1/tts/speakers", **auth).status_code == 200
    assert client.post("/v1/tts", {"text": "x"}, **auth).status_code == 401
    usage = "/v1/organization/usage/audio_speeches?start_time=0"
    assert client.get(usage, **auth).status_code == 401


# Through the sockets: the same admission and metering as a key.


async def connect(
    token: str, origin: str = ORIGIN, *, path: str = "/v1/tts/ws"
) -> WebsocketCommunicator:
    offered, key_protocol = (
        ("veena-tts", "veena-api-key.")
        if path == "/v1/tts/ws"
        else ("realtime", "openai-insecure-api-key.")
    )
    comm = WebsocketCommunicator(
        application,
        path,
        headers=[(b"origin", origin.encode())],
        subprotocols=[offered, key_protocol + token],
    )
    connected, subprotocol = await comm.connect()
    assert connected and subprotocol == offered  # the token is never echoed
    return comm


async def test_tts_with_a_token_is_metered_to_the_playground_key(
    embedded_worker: object, playground: Playground, caplog: pytest.LogCaptureFixture
) -> None:
    from accounts.models.usage import UsageRecord

    caplog.set_level(logging.DEBUG)
    comm = await connect(playground.token)
    await comm.send_to(text_data=json.dumps({"text": "Hello there.", "format": "pcm"}))
    while True:
        out = await comm.receive_output(timeout=10)
        if out.get("text") and json.loads(out["text"])["event"] == "complete":
            break
    assert (await comm.receive_output(timeout=5))["type"] == "websocket.close"
    await comm.disconnect()
    records = await database_sync_to_async(
        lambda: list(
            UsageRecord.objects.filter(account=playground.account).select_related(
                "api_key"
            )
        )
    )()
    assert [(r.api_key.display, r.status, r.tts_chars_in) for r in records] == [
        ("playground", "completed", len("Hello there."))
    ]
    assert all(playground.token not in r.getMessage() for r in caplog.records)


async def test_a_token_used_from_another_origin_is_refused(
    embedded_worker: object, playground: Playground
) -> None:
    comm = await connect(playground.token, origin="https://elsewhere.example")
    error = json.loads((await comm.receive_output(timeout=5))["text"])["error"]
    assert error["code"] == "AUTH_FAILED"
    assert (await comm.receive_output(timeout=5))["code"] == 1008
    await comm.disconnect()


async def test_a_token_takes_the_accounts_requests_per_minute_like_a_key(
    embedded_worker: object, transactional_db: None
) -> None:
    p = await database_sync_to_async(make_playground)({"requests_per_minute": 1})
    first = await connect(p.token)
    await first.send_to(text_data=json.dumps({"event": "ping"}))
    assert json.loads((await first.receive_output(timeout=5))["text"]) == {
        "event": "pong"
    }
    second = await connect(p.token)
    error = json.loads((await second.receive_output(timeout=5))["text"])["error"]
    assert error["code"] == "RATE_LIMIT_EXCEEDED" and error["retry_after_ms"] >= 1
    await first.disconnect()
    await second.disconnect()


async def test_realtime_with_a_token_opens_a_session(
    embedded_worker: object, playground: Playground
) -> None:
    comm = await connect(playground.token, path="/v1/realtime")
    event = json.loads((await comm.receive_output(timeout=5))["text"])
    assert event["type"] == "session.created"
    await comm.disconnect()
