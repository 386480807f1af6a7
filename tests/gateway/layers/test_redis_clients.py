"""Issue 31: every Redis client of a distributed process checks idle connections and retries
a command on a fresh connection, so no connection left stale by a Redis restart fails a
later session (the fault itself: tests/e2e/test_chaos.py). Probed in a child process with
``REDIS_URL`` set; nothing connects."""

from __future__ import annotations

from pathlib import Path

from gateway.layers.redis_layer import HEALTH_CHECK_S, RETRIES
from tests.test_settings import probe

CLIENTS = """
import django, json; django.setup()
from django.conf import settings as s
from django.core.cache import caches
from channels.layers import get_channel_layer
from accounts.journal import get_journal
from accounts.limits import get_limiter
from gateway.liveness import get_liveness
from veena_site.celery import app

def kwargs(pool):
    k = pool.connection_kwargs
    return {"health": k.get("health_check_interval"), "retries": k["retry"].get_retries()}

live = get_liveness()
cache = caches["default"]._cache
print(json.dumps({
    "layer": kwargs(get_channel_layer().create_pool(0)),
    "limiter": kwargs(get_limiter().client.connection_pool),
    "usage journal": kwargs(get_journal().client.connection_pool),
    "liveness sync": kwargs(live._sync.connection_pool),
    "liveness async": kwargs(live._client().connection_pool),
    "cache": kwargs(cache._get_connection_pool(True)),
    "broker": app.conf.broker_transport_options,
}))
"""


def test_every_redis_client_checks_and_retries_its_connections(tmp_path: Path) -> None:
    got = probe(tmp_path, CLIENTS, REDIS_URL="redis://127.0.0.1:1/0")
    broker = got.pop("broker")
    expected = {"health": HEALTH_CHECK_S, "retries": RETRIES}
    assert got == dict.fromkeys(got, expected), got
    assert broker["health_check_interval"] == HEALTH_CHECK_S
    assert broker["retry_on_timeout"] is True
