"""Client secrets (issue 35): minted from a key, they open one socket and nothing else.

A secret authenticates as the key that minted it, only on the WebSocket of its use, from
any source a key may use (headers, subprotocols, query), only while it has not expired and
its key, account (and playground member) are still good; every refusal is the bad-key
refusal. It is stored as a hash only, and over HTTP it opens nothing.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.utils import timezone

from accounts.auth import authenticate_websocket
from accounts.client_secrets import generate_secret, parse_secret, ttl_seconds
from accounts.exceptions import AdmissionDenied, InvalidExpiry
from accounts.keys import hash_key, parse_key
from accounts.models.choices import SecretUse
from gateway.logs import redact
from tests.accounts.conftest import dump_database
from veena_site.asgi import application

ORIGIN = "http://testserver"
# RFC 7230 tchar: what a WebSocket subprotocol may contain (RFC 6455 4.1).
SUBPROTOCOL_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
PATHS = {"tts": ("/v1/tts/ws", "tts"), "realtime": ("/v1/realtime", "asr")}


# The secret itself: pure functions.


def test_a_secret_is_checksummed_a_legal_subprotocol_and_no_key() -> None:
    raw = generate_secret()
    assert raw.startswith("ek_") and raw != generate_secret()
    assert parse_secret(raw) is not None and raw not in repr(parse_secret(raw))
    assert parse_secret(raw[:-1] + ("A" if raw[-1] != "A" else "B")) is None
    assert parse_secret(raw + "x") is None and parse_key(raw) is None
    assert SUBPROTOCOL_TOKEN.fullmatch("openai-insecure-api-key." + raw)
    assert redact(f"offered realtime, {raw}") == "offered realtime, [REDACTED]"


@pytest.mark.parametrize(
    ("expires_after", "seconds"),
    [
        (None, 600),
        ({}, 600),
        ({"anchor": "created_at", "seconds": 10}, 10),
        ({"seconds": 7200}, 7200),
    ],
)
def test_expires_after_takes_openais_range(expires_after: Any, seconds: int) -> None:
    assert ttl_seconds(expires_after) == seconds


@pytest.mark.parametrize(
    "expires_after",
    [
        {"seconds": 9},
        {"seconds": 7201},
        {"seconds": 60.5},
        {"seconds": True},
        {"anchor": "now"},
        [60],
    ],
)
def test_expires_after_outside_openais_range_is_refused(expires_after: Any) -> None:
    with pytest.raises(InvalidExpiry):
        ttl_seconds(expires_after)


# Through accounts.auth, against the database.


@dataclass
class Minted:
    account: Any
    user: Any
    api_key: Any
    raw_key: str
    secrets: dict[str, str]  # use → raw secret


def make_account(plan: dict[str, Any] | None = None, **key: Any) -> Minted:
    """An account with a member and a standard key, and secrets of both uses from it."""
    from django.contrib.auth.models import User

    from accounts.models.accounts import Account
    from accounts.models.plans import Plan
    from accounts.services.api_keys import api_key_create
    from accounts.services.client_secrets import client_secret_create

    name = f"cs-{uuid.uuid4().hex[:8]}"
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
    api_key, raw = api_key_create(
        account=account, name="server", actor=None, actor_label="tests", **key
    )
    secrets = {
        use: client_secret_create(
            api_key_id=api_key.id, use=SecretUse(use), ttl_seconds=60
        ).value
        for use in ("tts", "realtime")
    }
    return Minted(account, user, api_key, raw, secrets)


def playground_secret(m: Minted, use: str) -> str:
    from accounts.services.playground import playground_secret_mint

    return playground_secret_mint(
        account=m.account, user=m.user, origin=ORIGIN, use=SecretUse(use)
    ).value


@pytest.fixture
def minted(transactional_db: None) -> Minted:
    return make_account()


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


@pytest.mark.parametrize("use", ["tts", "realtime"])
@pytest.mark.parametrize("source", ["subprotocol", "bearer", "x-api-key", "query"])
async def test_a_secret_opens_its_socket_from_every_key_source_as_its_key(
    minted: Minted, use: str, source: str
) -> None:
    path, endpoint = PATHS[use]
    raw = minted.secrets[use]
    scope = {
        "subprotocol": lambda: ws_scope(path, subprotocols=[f"veena-api-key.{raw}"]),
        "bearer": lambda: ws_scope(path, headers={"Authorization": f"Bearer {raw}"}),
        "x-api-key": lambda: ws_scope(path, headers={"X-API-Key": raw}),
        "query": lambda: ws_scope(path, query=f"api_key={raw}"),
    }[source]()
    principal = await authenticate_websocket(scope, endpoint=endpoint)
    assert principal.key_id == minted.api_key.id
    assert principal.account_id == minted.account.id
    assert principal.allowed_origins == ("*",)  # the key lists none: any page
    assert principal.secret_id is not None


async def test_a_secret_opens_nothing_but_its_own_socket(minted: Minted) -> None:
    tts, realtime = minted.secrets["tts"], minted.secrets["realtime"]
    assert await refusal(ws_scope("/v1/realtime", query=f"api_key={tts}"), "asr")
    assert await refusal(ws_scope("/v1/tts/ws", query=f"api_key={realtime}"), "tts")
    offered = [f"veena-api-key.{tts}"]
    http = ws_scope("/v1/tts/ws", kind="http", subprotocols=offered)
    assert await refusal(http, "tts") == "invalid_api_key"  # POST /v1/tts's admission
    assert await refusal(ws_scope("/v1/other", subprotocols=offered), "tts")
    mixed = ws_scope(
        "/v1/tts/ws", subprotocols=offered, headers={"X-API-Key": minted.raw_key}
    )
    assert await refusal(mixed, "tts") == "invalid_api_key"
    unknown = ws_scope("/v1/tts/ws", query=f"api_key={generate_secret()}")
    assert await refusal(unknown, "tts") == "invalid_api_key"


def test_over_http_a_secret_opens_nothing(minted: Minted) -> None:
    client = Client()
    for raw in minted.secrets.values():
        auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
        assert client.get("/v1/tts/speakers", **auth).status_code == 401
        assert client.get("/v1/audio/voices", **auth).status_code == 401
        assert client.get("/v1/models", **auth).status_code == 401
        assert client.post("/v1/tts", {"text": "x"}, **auth).status_code == 401
        mint = client.post(
            "/v1/realtime/client_secrets", "{}", "application/json", **auth
        )
        assert mint.status_code == 401  # a secret mints no secrets
        usage = "/v1/organization/usage/audio_speeches?start_time=0"
        assert client.get(usage, **auth).status_code == 401


def test_a_secret_is_stored_as_its_hash_only(minted: Minted) -> None:
    from accounts.models.client_secrets import ClientSecret

    dump = dump_database()
    for raw in minted.secrets.values():
        assert raw not in dump and raw[3:] not in dump
        assert ClientSecret.objects.filter(secret_hash=hash_key(raw)).exists()


def _expire(m: Minted) -> None:
    from accounts.models.client_secrets import ClientSecret

    past = timezone.now() - timedelta(seconds=1)
    ClientSecret.objects.filter(api_key=m.api_key).update(expires_at=past)


def _revoke_key(m: Minted) -> None:
    from accounts.services.api_keys import api_key_revoke

    api_key_revoke(api_key=m.api_key, actor=None, reason="test")


def _expire_key(m: Minted) -> None:
    from accounts.models.api_keys import ApiKey

    past = timezone.now() - timedelta(seconds=1)
    ApiKey.objects.filter(pk=m.api_key.pk).update(expires_at=past)


def _deactivate_account(m: Minted) -> None:
    from accounts.services.accounts import account_update

    account_update(
        account=m.account, actor=None, actor_label="test", fields={"is_active": False}
    )


@pytest.mark.parametrize(
    "change",
    [_expire, _revoke_key, _expire_key, _deactivate_account],
    ids=["secret-expired", "key-revoked", "key-expired", "account-inactive"],
)
async def test_a_secret_is_refused_like_a_bad_key_once_its_backing_is_gone(
    minted: Minted, change: Any
) -> None:
    scope = lambda: ws_scope(  # noqa: E731
        "/v1/realtime",
        headers={"Authorization": f"Bearer {minted.secrets['realtime']}"},
    )
    await authenticate_websocket(scope(), endpoint="asr")
    await database_sync_to_async(change)(minted)
    assert await refusal(scope(), "asr") == "invalid_api_key"


def _remove_member(m: Minted) -> None:
    m.account.members.remove(m.user)


def _deactivate_user(m: Minted) -> None:
    m.user.is_active = False
    m.user.save(update_fields=["is_active"])


@pytest.mark.parametrize(
    "change", [_remove_member, _deactivate_user], ids=["removed", "inactive"]
)
async def test_a_playground_secret_dies_with_its_members_membership(
    minted: Minted, change: Any
) -> None:
    raw = await database_sync_to_async(playground_secret)(minted, "tts")
    scope = lambda: ws_scope(  # noqa: E731
        "/v1/tts/ws", subprotocols=["veena-tts", f"veena-api-key.{raw}"]
    )
    principal = await authenticate_websocket(scope(), endpoint="tts")
    assert principal.display == "playground" and principal.allowed_origins == (ORIGIN,)
    await database_sync_to_async(change)(minted)
    assert await refusal(scope(), "tts") == "invalid_api_key"


async def test_a_secret_obeys_its_keys_origins_and_plan(transactional_db: None) -> None:
    m = await database_sync_to_async(make_account)(
        {"allowed_endpoints": ["tts"]}, allowed_origins=["https://app.example.com"]
    )
    scope = ws_scope("/v1/tts/ws", query=f"api_key={m.secrets['tts']}")
    principal = await authenticate_websocket(scope, endpoint="tts")
    assert principal.allowed_origins == ("https://app.example.com",)
    realtime = ws_scope("/v1/realtime", query=f"api_key={m.secrets['realtime']}")
    assert await refusal(realtime, "asr") == "endpoint_not_allowed"


# Through the sockets: the same admission and metering as the key.


async def connect(
    raw: str, origin: str = ORIGIN, *, path: str = "/v1/tts/ws"
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
        subprotocols=[offered, key_protocol + raw],
    )
    connected, subprotocol = await comm.connect()
    assert connected and subprotocol == offered  # the secret is never echoed
    return comm


async def events_until(comm: WebsocketCommunicator, last: str) -> list[dict[str, Any]]:
    events = []
    while True:
        out = await comm.receive_output(timeout=10)
        if out.get("text"):
            events.append(json.loads(out["text"]))
            if events[-1].get("event") == last:
                return events


async def test_playground_tts_is_metered_to_the_playground_key_from_its_page_only(
    embedded_worker: object, minted: Minted, caplog: pytest.LogCaptureFixture
) -> None:
    from accounts.models.usage import UsageRecord

    caplog.set_level(logging.DEBUG)
    raw = await database_sync_to_async(playground_secret)(minted, "tts")
    comm = await connect(raw)
    await comm.send_to(text_data=json.dumps({"text": "Hello there.", "format": "pcm"}))
    await events_until(comm, "complete")
    await comm.disconnect()
    records = await database_sync_to_async(
        lambda: list(
            UsageRecord.objects.filter(account=minted.account).select_related("api_key")
        )
    )()
    assert [(r.api_key.display, r.status, r.tts_chars_in) for r in records] == [
        ("playground", "completed", len("Hello there."))
    ]
    assert all(raw not in r.getMessage() for r in caplog.records)
    elsewhere = await connect(raw, origin="https://elsewhere.example")
    error = json.loads((await elsewhere.receive_output(timeout=5))["text"])["error"]
    assert error["code"] == "AUTH_FAILED"
    assert (await elsewhere.receive_output(timeout=5))["code"] == 1008
    await elsewhere.disconnect()


async def test_a_secret_takes_the_accounts_requests_per_minute_like_its_key(
    embedded_worker: object, transactional_db: None
) -> None:
    m = await database_sync_to_async(make_account)({"requests_per_minute": 1})
    first = await connect(m.secrets["tts"])
    await first.send_to(text_data=json.dumps({"event": "ping"}))
    assert json.loads((await first.receive_output(timeout=5))["text"]) == {
        "event": "pong"
    }
    second = await connect(m.secrets["tts"])
    error = json.loads((await second.receive_output(timeout=5))["text"])["error"]
    assert error["code"] == "RATE_LIMIT_EXCEEDED" and error["retry_after_ms"] >= 1
    await first.disconnect()
    await second.disconnect()


async def test_revoking_the_key_stops_a_stream_its_secret_opened(
    embedded_worker: object, minted: Minted
) -> None:
    comm = await connect(minted.secrets["tts"])
    await comm.send_to(text_data=json.dumps({"event": "ping"}))
    assert json.loads((await comm.receive_output(timeout=5))["text"])["event"] == "pong"
    revoked_at = time.monotonic()
    await database_sync_to_async(_revoke_key)(minted)
    error = json.loads((await comm.receive_output(timeout=5))["text"])["error"]
    assert error["code"] == "AUTH_FAILED"
    assert (await comm.receive_output(timeout=5))["code"] == 1008
    assert time.monotonic() - revoked_at < 2.0  # accounts E7: within a second or so
    await comm.disconnect()


def mint(path: str, raw_key: str, body: dict[str, Any]) -> Any:
    return Client().post(
        path,
        json.dumps(body),
        "application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw_key}",
    )


async def test_a_realtime_secret_opens_its_session_with_its_configuration(
    embedded_worker: object, minted: Minted
) -> None:
    session = {
        "type": "transcription",
        "audio": {
            "input": {
                "format": {"type": "audio/pcmu"},
                "transcription": {"language": "en", "prompt": "Veena"},
                "turn_detection": None,
            }
        },
    }
    body = {
        "expires_after": {"anchor": "created_at", "seconds": 30},
        "session": session,
    }
    response = await database_sync_to_async(mint)(
        "/v1/realtime/client_secrets", minted.raw_key, body
    )
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["value"].startswith("ek_")
    assert answer["expires_at"] == pytest.approx(time.time() + 30, abs=5)
    echoed = answer["session"]["audio"]["input"]
    assert (
        echoed["format"] == {"type": "audio/pcmu"} and echoed["turn_detection"] is None
    )
    comm = await connect(answer["value"], path="/v1/realtime")
    created = json.loads((await comm.receive_output(timeout=5))["text"])
    assert created["type"] == "session.created"
    audio = created["session"]["audio"]["input"]
    assert audio["format"] == {"type": "audio/pcmu"} and audio["turn_detection"] is None
    assert audio["transcription"]["language"] == "en"
    assert audio["transcription"]["prompt"] == "Veena"
    await comm.disconnect()


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"session": {"type": "realtime"}}, "session.type"),
        ({"session": {"type": "transcription", "voice": "x"}}, "session.voice"),
        ({"expires_after": {"seconds": 5}}, "expires_after.seconds"),
    ],
)
def test_a_realtime_mint_refuses_what_openai_refuses(
    minted: Minted, body: dict[str, Any], param: str
) -> None:
    response = mint("/v1/realtime/client_secrets", minted.raw_key, body)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == param


async def test_a_tts_secret_pins_voice_and_format_on_its_socket(
    embedded_worker: object, minted: Minted
) -> None:
    body = {"session": {"voice": "male1", "format": "pcm", "sample_rate": 24000}}
    response = await database_sync_to_async(mint)(
        "/v1/tts/client_secrets", minted.raw_key, body
    )
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["session"] == {
        "type": "tts",
        "voice": "tone",
        "format": "pcm",
        "sample_rate": 24000,
    }
    comm = await connect(answer["value"])
    request = {"text": "Hello.", "format": "wav", "sample_rate": 8000}
    await comm.send_to(text_data=json.dumps(request))
    events = await events_until(comm, "complete")
    header = events[0]
    assert (header["format"], header["sample_rate"], header["speaker"]) == (
        "pcm",
        24000,
        "tone",
    )
    await comm.disconnect()


@pytest.mark.parametrize(
    "session",
    [
        {"voice": "nobody"},
        {"format": "ogg"},
        {"sample_rate": 24000},
        {"format": "mulaw", "sample_rate": 16000},
        {"type": "transcription"},
        {"speed": 2},
    ],
)
def test_a_tts_mint_refuses_a_session_no_request_could_have(
    minted: Minted, session: dict[str, Any]
) -> None:
    response = mint("/v1/tts/client_secrets", minted.raw_key, {"session": session})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
