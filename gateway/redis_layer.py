"""The channels-redis host entry, shared by the settings and the tests that build a layer.

``RedisChannelLayer.receive`` waits in ``BZPOPMIN`` for up to ``brpop_timeout`` (5 s). redis-py 8
reads every reply with a 5 s socket timeout by default, so a receive on an idle channel raced the
server's empty reply and raised ``redis.exceptions.TimeoutError``: an idle ``gpuworker`` lost
its listener (and the supervisor stopped the service) after 5–8 s, and any consumer could lose
its own channel. Reads here get a socket timeout well above the blocking wait.
"""

from __future__ import annotations

from typing import Any

BLOCKING_WAIT_S = 5  # channels_redis.core.RedisChannelLayer.brpop_timeout
CONNECT_TIMEOUT_S = 5.0


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
    }
