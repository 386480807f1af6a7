"""The ledger on the distributed topology with the real engines (issue 30).

A ``rungateway`` and a ``gpuworker`` (Piper and faster-whisper) on Redis (this run's prefix)
and a fresh PostgreSQL database. The same mix as the embedded module
(``tests.support.ledger``); immediately after the last request the records, the quota
counters, the hourly and daily rollups, the CSV, the usage API and the dashboard page in
Chromium all equal what the client was served.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tests.conftest import _unavailable, free_port
from tests.support.ledger import ledger_speech, run_ledger
from tests.support.redis_db import redis_test_url
from tests.support.services import project_env, start_gateway, start_worker, wait_ready

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.redis,
    pytest.mark.postgres,
]

START_S = 180.0  # two Django processes loading the engines on a shared machine


@pytest.fixture(scope="module")
def cluster(
    pg_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, dict[str, str]]]:
    url = redis_test_url()
    try:
        redis.Redis.from_url(url, socket_timeout=2).ping()
    except redis.RedisError:
        _unavailable("Redis at " + url)
    data = tmp_path_factory.mktemp("ledger")
    tag = uuid.uuid4().hex[:8]
    env = project_env(
        data,
        DATABASE_URL=pg_database,
        REDIS_URL=url,
        CHANNEL_PREFIX=f"lg{tag}",
        REDIS_KEY_PREFIX=f"lg{tag}:",
    )
    env["DJANGO_SETTINGS_MODULE"] = "tests.e2e.engine_settings"
    port = free_port()
    worker = start_worker(env, data / "worker.log")
    gateway = start_gateway(env, port, data / "gateway.log")
    try:
        wait_ready(port, worker, gateway, limit_s=START_S)
        yield f"http://127.0.0.1:{port}", env
    finally:
        for service in (gateway, worker):
            service.stop()
        client = redis.Redis.from_url(url)
        for key in client.scan_iter(match=f"lg{tag}*"):
            client.delete(key)
    for service in (gateway, worker):
        assert "Traceback" not in service.log.read_text(errors="replace"), (
            service.tail()
        )


@pytest.fixture(scope="module")
def speech() -> tuple[bytes, bytes]:
    return ledger_speech()


def test_ledger_distributed_every_surface_equals_what_was_served(
    cluster: tuple[str, dict[str, str]],
    speech: tuple[bytes, bytes],
    browser_context: Any,
) -> None:
    base, env = cluster
    run_ledger(
        "distributed", base=base, env=env, context=browser_context, speech=speech
    )
