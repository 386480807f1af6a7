"""Fixtures for the accounts tests: plans, accounts and keys made through the services."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from django.db import connection

from accounts import admission as admission_module
from accounts.auth import principal_cache
from accounts.limits import MemoryLimiter, RedisLimiter, reset_limiters
from accounts.models.accounts import Account
from accounts.models.api_keys import ApiKey
from accounts.models.plans import Plan
from accounts.services.accounts import account_get_or_create, plan_get_or_create_default
from accounts.services.api_keys import api_key_create

MakeKey = Callable[..., tuple[ApiKey, str]]


@pytest.fixture(autouse=True)
def fresh_limits() -> Iterator[None]:
    """Each test starts with an empty in-process store, principal cache and K9 memory."""
    reset_limiters()
    principal_cache.clear()
    admission_module._touched.clear()
    yield
    reset_limiters()
    principal_cache.clear()


@pytest.fixture
def backend(limits_backend: str) -> str:
    """Run the test once on MemoryLimiter and once on RedisLimiter (accounts B5)."""
    return limits_backend


class FakeClock:
    """Milliseconds that only move when told to."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A bare limiter with a short RPM window, plus ``store.advance(ms)`` to move time.

    Memory moves an injected clock; Redis (whose clock is its own ``TIME``) sleeps, so the
    durations used with it stay small.
    """
    if request.param == "memory":
        clock = FakeClock()
        limiter: Any = MemoryLimiter(clock=clock, rpm_window_ms=300)

        def advance(ms: int) -> None:
            clock.now += ms

    else:
        client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
        limiter = RedisLimiter(
            client, prefix=f"t{uuid.uuid4().hex[:8]}:", rpm_window_ms=300
        )

        def advance(ms: int) -> None:
            time.sleep(ms / 1000)

    limiter.advance = advance
    limiter.backend = request.param
    yield limiter
    if request.param == "redis":
        client.close()


@pytest.fixture
def plan(db: None) -> Plan:
    return plan_get_or_create_default()


@pytest.fixture
def account(plan: Plan) -> Account:
    return account_get_or_create(name="Acme", plan=None)


@pytest.fixture
def make_key(account: Account) -> MakeKey:
    """Create a key through the service; returns ``(api_key, raw)``."""

    def make(**kwargs: Any) -> tuple[ApiKey, str]:
        kwargs.setdefault("account", account)
        kwargs.setdefault("name", "test key")
        kwargs.setdefault("actor", None)
        kwargs.setdefault("actor_label", "pytest")
        return api_key_create(**kwargs)

    return make


def dump_database() -> str:
    """Every row of every table, as text, to search for secrets (accounts S1)."""
    chunks = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            chunks.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(chunks)


def bearer_scope(raw: str, *, origin: str | None = None) -> dict[str, Any]:
    """A WebSocket scope that carries ``raw`` as a bearer token."""
    headers = [(b"authorization", f"Bearer {raw}".encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return {
        "type": "websocket",
        "query_string": b"",
        "headers": headers,
        "subprotocols": [],
    }


@pytest.fixture
def plan_rpm() -> int:
    """The accounts tests' plans allow 100 requests a minute unless a test says otherwise."""
    return 100
