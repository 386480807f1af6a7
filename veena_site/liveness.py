"""Worker liveness: each worker publishes its status every second with a short TTL.

Gateways read it for ``/readyz`` and ``/metrics``. With ``REDIS_URL`` the status lives in Redis, so
every gateway sees every worker; the embedded default keeps it in process memory.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any, Protocol

import redis
import redis.asyncio as aioredis
from django.conf import settings


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


class RedisLiveness:
    """Redis store shared by every gateway and worker on the same Redis."""

    def __init__(self, url: str, ttl_s: float, prefix: str) -> None:
        self.url, self.ttl_s, self.prefix = url, ttl_s, prefix
        self._sync = redis.Redis.from_url(url, socket_timeout=2)
        self._async: aioredis.Redis | None = None

    def _key(self, worker_id: str) -> str:
        return f"{self.prefix}:worker:{worker_id}"

    async def publish(self, status: WorkerStatus) -> None:
        if self._async is None:
            self._async = aioredis.Redis.from_url(self.url, socket_timeout=2)
        ttl_ms = int(self.ttl_s * 1000)
        await self._async.set(
            self._key(status.worker_id), json.dumps(asdict(status)), px=ttl_ms
        )

    async def withdraw(self, worker_id: str) -> None:
        if self._async is not None:
            await self._async.delete(self._key(worker_id))

    def live_workers(self) -> list[WorkerStatus]:
        keys = list(self._sync.scan_iter(match=self._key("*"), count=100))
        values = self._sync.mget(keys) if keys else []
        return [WorkerStatus(**json.loads(v)) for v in values if v]


@cache
def get_liveness() -> LivenessStore:
    """Return the process's liveness store for the configured topology."""
    if settings.REDIS_URL:
        config: Any = settings.CHANNEL_LAYERS["default"]["CONFIG"]
        prefix = str(config.get("prefix", "veena"))
        return RedisLiveness(settings.REDIS_URL, settings.WORKER_TTL_S, prefix)
    return MemoryLiveness(settings.WORKER_TTL_S)
