"""Worker liveness: each worker publishes its status every second with a short TTL.

Gateways read it for ``/readyz``, ``/metrics`` and job placement (``gateway.link.placement``). With
``REDIS_URL`` the status lives in Redis, so every gateway sees every worker; the embedded default
keeps it in process memory. In Redis each status is one key with a TTL, and a sorted set indexes
the worker ids, so a read is two round trips (no ``SCAN`` over the channel layer's keys).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from functools import cache
from typing import Any, Protocol

import redis
import redis.asyncio as aioredis
from django.conf import settings

from gateway.layers.redis_layer import async_options, sync_options


@dataclass(frozen=True)
class WorkerStatus:
    """What one worker process says about itself."""

    worker_id: str
    kinds: list[str]
    ready: dict[str, bool]
    slots: dict[str, int]
    busy: dict[str, int]
    model_versions: dict[str, str] = field(default_factory=dict)
    at: float = field(default_factory=time.time)
    # kind → this worker's own submission channel (empty: only the shared channel).
    channels: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, raw: str | bytes) -> WorkerStatus:
        """Parse a published status, ignoring fields this version does not know."""
        data = json.loads(raw)
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def free(self, kind: str) -> int:
        """Slots of ``kind`` free when the status was published."""
        return self.slots.get(kind, 0) - self.busy.get(kind, 0)

    def serves(self, kind: str) -> bool:
        """True when this worker has a loaded engine for ``kind``."""
        return kind in self.kinds and self.ready.get(kind, False)


class LivenessStore(Protocol):
    """Where worker statuses are published and read."""

    async def publish(self, status: WorkerStatus) -> None:
        """Record ``status`` for ``WORKER_TTL_S`` seconds."""
        ...

    async def withdraw(self, worker_id: str) -> None:
        """Remove a worker that is shutting down."""
        ...

    def live_workers(self) -> list[WorkerStatus]:
        """Statuses published within the TTL."""
        ...

    async def read(self) -> list[WorkerStatus]:
        """``live_workers()`` without blocking the event loop."""
        ...


class MemoryLiveness:
    """In-process store for the embedded default."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._statuses: dict[str, WorkerStatus] = {}

    async def publish(self, status: WorkerStatus) -> None:
        self._statuses[status.worker_id] = status

    async def withdraw(self, worker_id: str) -> None:
        self._statuses.pop(worker_id, None)

    def live_workers(self) -> list[WorkerStatus]:
        horizon = time.time() - self.ttl_s
        return [s for s in self._statuses.values() if s.at >= horizon]

    async def read(self) -> list[WorkerStatus]:
        return self.live_workers()


class RedisLiveness:
    """Redis store shared by every gateway and worker on the same Redis."""

    # Index entries whose worker has not published for this long are pruned (its key has
    # long expired; the margin absorbs clock skew between machines).
    PRUNE_AFTER_S = 300.0

    def __init__(self, url: str, ttl_s: float, prefix: str) -> None:
        self.url, self.ttl_s, self.prefix = url, ttl_s, prefix
        self._sync = redis.Redis.from_url(url, socket_timeout=2, **sync_options())
        self._async: aioredis.Redis | None = None
        self.index = f"{prefix}:workers"

    def _key(self, worker_id: str) -> str:
        return f"{self.prefix}:worker:{worker_id}"

    def _client(self) -> aioredis.Redis:
        if self._async is None:
            self._async = aioredis.Redis.from_url(
                self.url, socket_timeout=2, **async_options()
            )
        return self._async

    async def publish(self, status: WorkerStatus) -> None:
        ttl_ms = int(self.ttl_s * 1000)
        async with self._client().pipeline(transaction=False) as pipe:
            pipe.set(self._key(status.worker_id), json.dumps(asdict(status)), px=ttl_ms)
            pipe.zadd(self.index, {status.worker_id: status.at})
            pipe.zremrangebyscore(self.index, "-inf", status.at - self.PRUNE_AFTER_S)
            await pipe.execute()

    async def withdraw(self, worker_id: str) -> None:
        async with self._client().pipeline(transaction=False) as pipe:
            pipe.delete(self._key(worker_id))
            pipe.zrem(self.index, worker_id)
            await pipe.execute()

    def live_workers(self) -> list[WorkerStatus]:
        ids: list[bytes] = self._sync.zrange(self.index, 0, -1)  # type: ignore[assignment]
        values = self._sync.mget([self._key(i.decode()) for i in ids]) if ids else []
        return [WorkerStatus.from_json(v) for v in values if v]

    async def read(self) -> list[WorkerStatus]:
        client = self._client()
        ids: list[bytes] = await client.zrange(self.index, 0, -1)  # type: ignore[assignment]
        keys = [self._key(i.decode()) for i in ids]
        values = await client.mget(keys) if keys else []
        return [WorkerStatus.from_json(v) for v in values if v]


@cache
def get_liveness() -> LivenessStore:
    """Return the process's liveness store for the configured topology."""
    if settings.REDIS_URL:
        config: Any = settings.CHANNEL_LAYERS["default"]["CONFIG"]
        prefix = str(config.get("prefix", "veena"))
        return RedisLiveness(settings.REDIS_URL, settings.WORKER_TTL_S, prefix)
    return MemoryLiveness(settings.WORKER_TTL_S)
