"""Shared fixtures: real Redis / PostgreSQL (required in CI), the embedded worker, API keys."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from channels.db import database_sync_to_async
from channels.layers import channel_layers

from gateway.liveness import get_liveness
from tests.support.redis_db import redis_test_url
from veena_site.conf.registry import child_environment
from veena_site.runtime import get_runtime, reset_runtime

ROOT = Path(__file__).resolve().parent.parent
POSTGRES_TEST_URL = os.environ.get(
    "POSTGRES_TEST_URL", "postgres://postgres@127.0.0.1:5432/test"
)
IN_CI = os.environ.get("CI") == "true"


def _unavailable(what: str) -> None:
    if IN_CI:
        pytest.fail(f"{what} is not reachable; CI must run these tests, not skip them")
    pytest.skip(f"{what} is not reachable")


# After the summary the interpreter must end: a thread or child process that keeps it alive is
# a leak. Past this, every thread's stack goes to stderr and the run exits 1 (never CI's timeout).
EXIT_WATCHDOG_S = 120


def pytest_unconfigure(config: pytest.Config) -> None:
    """Arm the exit watchdog (faulthandler: it works while every Python thread is stuck)."""
    faulthandler.dump_traceback_later(EXIT_WATCHDOG_S, exit=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked ``vllm`` need the vLLM tier: skipped without it locally, failed in CI."""
    if item.get_closest_marker("vllm") is not None:
        from gateway.worker.vllm_env import vllm_installed

        if not vllm_installed():
            _unavailable("the vLLM tier (make vllm)")


@pytest.fixture
def redis_url() -> Iterator[str]:
    """This run's Redis database (tests/support/redis_db.py), flushed before and after."""
    url = redis_test_url()
    client = redis.Redis.from_url(url, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError:
        _unavailable("Redis at " + url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()


@pytest.fixture
def postgres_url() -> str:
    """The PostgreSQL server URL, checked to answer."""
    import psycopg

    try:
        psycopg.connect(POSTGRES_TEST_URL, connect_timeout=3).close()
    except psycopg.Error:
        _unavailable("PostgreSQL at " + POSTGRES_TEST_URL)
    return POSTGRES_TEST_URL


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_env(**settings: object) -> dict[str, str]:
    """Environment for a child process of the project with ``settings``: an operator's
    setting (or any other variable) as its environment variable, a constant through
    ``SETTINGS_OVERRIDES``, which ``tests.settings`` applies (docs/settings.md)."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")
    }
    env.update({"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
    return child_environment(env, **settings)


def manage(
    *args: str, env: dict[str, str], **kwargs: object
) -> subprocess.Popen[bytes]:
    """Start ``manage.py`` with ``args`` as a child process."""
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), *args], env=env, cwd=ROOT, **kwargs
    )


@pytest.fixture(scope="module")
def pg_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh PostgreSQL database with every migration applied, for this module."""
    import psycopg

    try:
        psycopg.connect(POSTGRES_TEST_URL, connect_timeout=3).close()
    except psycopg.Error:
        _unavailable("PostgreSQL at " + POSTGRES_TEST_URL)
    name = f"veena_x_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_TEST_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = POSTGRES_TEST_URL.rsplit("/", 1)[0] + "/" + name
    env = child_env(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=url,
        REDIS_URL=redis_test_url(),
        DATA_DIR=str(tmp_path_factory.mktemp("data")),
    )
    try:
        migrate = manage("migrate", "--noinput", env=env, stdout=subprocess.PIPE)
        assert migrate.wait(timeout=120) == 0
        yield url
    finally:
        with psycopg.connect(POSTGRES_TEST_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(autouse=True)
def fresh_layers_and_runtime() -> Iterator[None]:
    """Each test gets a fresh channel layer, runtime, liveness store, limiter and key cache."""
    _reset_process_state()
    yield
    _reset_process_state()


def _reset_process_state() -> None:
    from accounts.auth import principal_cache
    from accounts.limits import reset_limiters
    from gateway.server import lifecycle

    channel_layers.backends.clear()
    reset_runtime()
    get_liveness.cache_clear()
    reset_limiters()
    principal_cache.clear()
    lifecycle.reset()


@contextlib.asynccontextmanager
async def running_worker() -> AsyncIterator[Any]:
    """Start the worker consumer in the running loop; shut it down at exit."""
    from veena_site.embedded import start_embedded_worker

    task = start_embedded_worker()
    runtime = get_runtime()
    await runtime.wait_loaded()
    try:
        yield runtime
    finally:
        await runtime.shutdown()
        task.cancel()


@pytest.fixture
async def embedded_worker() -> AsyncIterator[object]:
    """The worker consumer running in the test's event loop on the in-memory layer."""
    async with running_worker() as runtime:
        yield runtime


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def limits_backend(request: pytest.FixtureRequest, settings: Any) -> str:
    """The limits store on MemoryLimiter, and on RedisLimiter under the ``redis`` marker."""
    if request.param == "redis":
        settings.REDIS_URL = request.getfixturevalue("redis_url")
        settings.REDIS_KEY_PREFIX = f"t{uuid.uuid4().hex[:8]}:"
    else:
        settings.REDIS_URL = ""
    return str(request.param)


KeyMaker = Callable[..., Awaitable[tuple[Any, str]]]


@pytest.fixture
def plan_rpm() -> int:
    """The ``requests_per_minute`` of the plans ``keyed`` makes, unless a test sets it."""
    return 1000


@pytest.fixture
def keyed(transactional_db: None, plan_rpm: int) -> KeyMaker:
    """``await keyed({plan values}, **key fields)``: a key on a fresh account and plan."""
    from accounts.models.accounts import Account
    from accounts.models.plans import Plan
    from accounts.services.api_keys import api_key_create

    def make_sync(plan: dict[str, Any] | None, **key: Any) -> tuple[Any, str]:
        values = {
            "requests_per_minute": plan_rpm,
            "max_concurrent_streams": 10,
            "monthly_tts_characters": None,
            "monthly_asr_seconds": None,
            "max_session_seconds": 600,
            **(plan or {}),
        }
        name = f"p-{uuid.uuid4().hex[:8]}"
        account = Account.objects.create(
            name=name, slug=name, plan=Plan.objects.create(name=name, **values)
        )
        return api_key_create(
            account=account, name="k", actor=None, actor_label="pytest", **key
        )

    async def make(plan: dict[str, Any] | None = None, **key: Any) -> tuple[Any, str]:
        return await database_sync_to_async(make_sync)(plan, **key)

    return make


@pytest.fixture
def api_key(transactional_db: None) -> str:
    """A raw API key of a fresh account on the default plan."""
    from accounts.services.accounts import (
        account_get_or_create,
        plan_get_or_create_default,
    )
    from accounts.services.api_keys import api_key_create

    account = account_get_or_create(
        name=f"acct-{uuid.uuid4().hex[:8]}", plan=plan_get_or_create_default()
    )
    _, raw = api_key_create(
        account=account, name="test", actor=None, actor_label="tests"
    )
    return raw
