"""``RedisLimiter``: the limits store shared by every gateway process (accounts B1–B4).

Each atomic operation is one Lua script in ``lua/``, registered once with
``register_script`` (EVALSHA, falling back to EVAL). Every timestamp comes from Redis
``TIME``, so all processes share one clock (R3).
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar
from uuid import UUID

import redis

from accounts.exceptions import LimitsUnavailable
from accounts.limits.base import (
    GENERATION_TTL_MS,
    KEY_VERSION_TTL_MS,
    QUOTA_MIRROR_TTL_MS,
    RPM_WINDOW_MS,
    Decision,
    Keys,
    Limiter,
    QuotaGrant,
    QuotaKeys,
    lease_refused,
)
from gateway.layers.redis_layer import sync_options

LUA_DIR = Path(__file__).resolve().parent / "lua"
SCRIPTS = (
    "take_request",
    "refund_request",
    "acquire_lease",
    "renew_lease",
    "release_lease",
    "reserve_quota",
    "adjust_quota",
    "settle_quota",
    "seed_quota",
    "reconcile_quota",
    "set_key_version",
    "sweep_leases",
    "unlock",
)
# A limits call blocks admission; an unreachable store must fail fast (E4).
SOCKET_TIMEOUT_S = 1.0
SWEEP_BATCH = 100

P = ParamSpec("P")
R = TypeVar("R")


def _store_call(method: Callable[P, R]) -> Callable[P, R]:
    """Turn any Redis failure into LimitsUnavailable."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except (redis.RedisError, OSError) as exc:
            raise LimitsUnavailable("limits store unreachable") from exc

    return wrapper


class RedisLimiter(Limiter):
    """The Limiter on Redis ≥ 7 with ``maxmemory-policy noeviction`` (B4)."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        prefix: str = "veena:",
        rpm_window_ms: int = RPM_WINDOW_MS,
    ) -> None:
        self.client = client
        self.keys = Keys(prefix)
        self.rpm_window_ms = rpm_window_ms
        self._scripts = {
            name: client.register_script((LUA_DIR / f"{name}.lua").read_text())
            for name in SCRIPTS
        }

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> RedisLimiter:
        """A limiter on its own connection pool with short timeouts."""
        client = redis.Redis.from_url(
            url,
            socket_timeout=SOCKET_TIMEOUT_S,
            socket_connect_timeout=SOCKET_TIMEOUT_S,
            **sync_options(),  # health checks and retries (gateway.layers.redis_layer)
        )
        return cls(client, **kwargs)

    def _run(self, name: str, keys: list[str], args: list[str | int]) -> Any:
        return self._scripts[name](keys=keys, args=args)

    @_store_call
    def _take(self, member: str, logs: list[str], limits: list[int]) -> Decision:
        allowed, retry = self._run(
            "take_request", logs, [member, self.rpm_window_ms, *limits]
        )
        return Decision(bool(allowed), int(retry))

    @_store_call
    def _refund(self, member: str, logs: list[str]) -> None:
        self._run("refund_request", logs, [member])

    @_store_call
    def _acquire(
        self, member: str, sets: list[str], limits: list[int], ttl_ms: int
    ) -> Decision:
        full = int(self._run("acquire_lease", sets, [member, ttl_ms, *limits]))
        return lease_refused(full, limits) if full else Decision(True)

    @_store_call
    def _renew(self, member: str, sets: list[str], ttl_ms: int) -> bool:
        return bool(self._run("renew_lease", sets, [member, ttl_ms]))

    @_store_call
    def _release(self, member: str, sets: list[str]) -> None:
        self._run("release_lease", sets, [member])

    @_store_call
    def quota_generation(self, account_id: int) -> int:
        value = self.client.get(self.keys.generation(account_id))
        return int(value) if value is not None else 0

    @_store_call
    def _reserve(
        self,
        keys: QuotaKeys,
        amount: int,
        limit: int | None,
        partial: bool,
        holder: str | None,
    ) -> QuotaGrant | None:
        names = [keys.quota]
        args: list[str | int] = [amount, -1 if limit is None else limit, int(partial)]
        if holder is not None:
            names.append(keys.reservations)
            args += [holder, QUOTA_MIRROR_TTL_MS]
        granted, remaining = self._run("reserve_quota", names, args)
        if granted < 0:
            return None
        return QuotaGrant(int(granted), None if remaining < 0 else int(remaining))

    @_store_call
    def _settle(
        self, keys: QuotaKeys, holder: str, outstanding: int, delta: int
    ) -> None:
        names = [keys.quota, keys.reservations, keys.generation]
        args: list[str | int] = [holder, max(0, outstanding), delta, GENERATION_TTL_MS]
        self._run("settle_quota", names, args)

    @_store_call
    def _adjust(self, quota: str, delta: int) -> None:
        self._run("adjust_quota", [quota], [delta])

    @_store_call
    def _seed(self, quota: str, used: int) -> int:
        return int(self._run("seed_quota", [quota], [used, QUOTA_MIRROR_TTL_MS]))

    @_store_call
    def _reconcile(self, keys: QuotaKeys, used: int, generation: int) -> bool | None:
        names = [keys.quota, keys.reservations, keys.leases, keys.generation]
        result = int(self._run("reconcile_quota", names, [used, generation]))
        return None if result < 0 else bool(result)

    @_store_call
    def key_version(self, key_id: UUID) -> int | None:
        value = self.client.get(self.keys.key_version(key_id))
        return int(value) if value is not None else None

    @_store_call
    def set_key_version(self, key_id: UUID, version: int) -> int:
        return int(
            self._run(
                "set_key_version",
                [self.keys.key_version(key_id)],
                [version, KEY_VERSION_TTL_MS],
            )
        )

    @_store_call
    def sweep(self) -> int:
        removed = 0
        batch: list[str] = []
        for key in self.client.scan_iter(
            match=f"{self.keys.prefix}cc:*", count=SWEEP_BATCH
        ):
            batch.append(key.decode() if isinstance(key, bytes) else key)
            if len(batch) == SWEEP_BATCH:
                removed += self._sweep(batch)
                batch = []
        return removed + (self._sweep(batch) if batch else 0)

    def _sweep(self, keys: list[str]) -> int:
        # One call per key: keys of different accounts may live on different cluster slots.
        return sum(int(self._run("sweep_leases", [key], [])) for key in keys)

    @_store_call
    def try_lock(self, name: str, ttl_ms: int) -> str | None:
        token = secrets.token_hex(16)
        taken = self.client.set(self.keys.lock(name), token, nx=True, px=ttl_ms)
        return token if taken else None

    @_store_call
    def unlock(self, name: str, token: str) -> None:
        self._run("unlock", [self.keys.lock(name)], [token])
