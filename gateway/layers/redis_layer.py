"""How every Redis client of the project connects: the channel layer's host entry, and the
options the limits store, liveness, the cache and Celery's broker share.

* Reads outlast a blocking receive. ``RedisChannelLayer.receive`` waits in ``BZPOPMIN`` for up
  to ``brpop_timeout`` (5 s). redis-py 8 reads every reply with a 5 s socket timeout by
  default, so a receive on an idle channel raced the server's empty reply and raised
  ``redis.exceptions.TimeoutError``: an idle ``gpuworker`` lost its listener after 5–8 s.
  Reads here get a socket timeout well above the blocking wait.
* No stale pooled connection fails a caller (issue 31). A Redis restart leaves every pooled
  connection dead, and each failed its next command once: the first sessions after the restart
  and, 40 s later, one whose command drew a connection idle since then. Every client here
  checks a connection idle for ``HEALTH_CHECK_S`` with a ``PING`` before using it, and a
  command that fails on its connection is retried ``RETRIES`` times on a new one.
* An unreachable server is reported at once: those retries wait 10–40 ms (redis-py's default
  backs off up to 1 s, ten times), so a new session during an outage is refused in
  milliseconds, not seconds.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio.retry
import redis.retry
from redis.backoff import ExponentialBackoff

BLOCKING_WAIT_S = 5  # channels_redis.core.RedisChannelLayer.brpop_timeout
CONNECT_TIMEOUT_S = 5.0
HEALTH_CHECK_S = 5  # a connection idle this long is PINGed before its next command
RETRIES = 2  # a command that fails on its connection runs again on a new one
RETRY_BACKOFF = {"base": 0.01, "cap": 0.04}


def sync_options() -> dict[str, Any]:
    """Options of a synchronous client (``redis.Redis``, Django's cache)."""
    return {
        "retry": redis.retry.Retry(ExponentialBackoff(**RETRY_BACKOFF), RETRIES),
        "health_check_interval": HEALTH_CHECK_S,
    }


def async_options() -> dict[str, Any]:
    """Options of an asyncio client (``redis.asyncio.Redis``, the channel layer's pool)."""
    retry = redis.asyncio.retry.Retry(ExponentialBackoff(**RETRY_BACKOFF), RETRIES)
    return {"retry": retry, "health_check_interval": HEALTH_CHECK_S}


def broker_options() -> dict[str, Any]:
    """Celery's ``broker_transport_options`` for kombu's Redis transport."""
    return {
        "health_check_interval": HEALTH_CHECK_S,
        "retry_on_timeout": True,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
    }


def redis_host(url: str, *, socket_timeout_s: float) -> dict[str, Any]:
    """One ``hosts`` entry for ``url`` whose reads outlast a blocking receive."""
    if socket_timeout_s <= BLOCKING_WAIT_S:
        raise ValueError(
            f"REDIS_SOCKET_TIMEOUT_S must exceed the layer's {BLOCKING_WAIT_S} s blocking wait"
        )
    return {
        "address": url,
        "socket_timeout": socket_timeout_s,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        **async_options(),
    }
