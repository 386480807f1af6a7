"""``MemoryLimiter``: the limits store of the embedded single-process default (accounts B1, B2).

The same semantics as the Lua scripts, under one lock, so the scheduler's threads and the
event loop can share it. The clock is injectable (milliseconds), which lets the contract
tests move time instead of sleeping.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from uuid import UUID

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
    holder_member,
    lease_refused,
)

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    """Milliseconds since the epoch, like Redis ``TIME``."""
    return time.time_ns() // 1_000_000


class MemoryLimiter(Limiter):
    """The Limiter in process memory; one instance serves one process."""

    def __init__(
        self, *, clock: Clock = wall_clock_ms, rpm_window_ms: int = RPM_WINDOW_MS
    ) -> None:
        self.clock = clock
        self.rpm_window_ms = rpm_window_ms
        self.keys = Keys("")
        self._lock = threading.Lock()
        # Sorted sets: member -> score. Strings: key -> (value, expires_at_ms or None).
        self._sets: dict[str, dict[str, int]] = {}
        self._values: dict[str, tuple[int | str, int | None]] = {}
        # Hashes (the reservations of Q11): key -> field -> amount.
        self._hashes: dict[str, dict[str, int]] = {}

    # Primitives, called with the lock held.

    def _prune(self, key: str, *, upto: int) -> int:
        members = self._sets.get(key)
        if not members:
            return 0
        expired = [m for m, score in members.items() if score <= upto]
        for member in expired:
            del members[member]
        if not members:
            del self._sets[key]
        return len(expired)

    def _get(self, key: str, now: int) -> int | str | None:
        item = self._values.get(key)
        if item is None:
            return None
        value, expires_at = item
        if expires_at is not None and expires_at <= now:
            del self._values[key]
            return None
        return value

    def _set(self, key: str, value: int | str, *, ttl_ms: int | None, now: int) -> None:
        self._values[key] = (value, None if ttl_ms is None else now + ttl_ms)

    def _ttl_of(self, key: str) -> int | None:
        item = self._values.get(key)
        return None if item is None else item[1]

    # Requests per minute (R1-R5).

    def _take(self, member: str, logs: list[str], limits: list[int]) -> Decision:
        with self._lock:
            now = self.clock()
            retry = 0
            for key, limit in zip(logs, limits, strict=True):
                self._prune(key, upto=now - self.rpm_window_ms)
                scores = sorted(self._sets.get(key, {}).values())
                if len(scores) >= limit:
                    wait = scores[len(scores) - limit] + self.rpm_window_ms - now
                    retry = max(retry, wait, 1)
            if retry:
                return Decision(False, retry)
            for key in logs:
                self._sets.setdefault(key, {})[member] = now
            return Decision(True)

    def _refund(self, member: str, logs: list[str]) -> None:
        with self._lock:
            self._remove(logs, member)

    def _remove(self, keys: list[str], member: str) -> None:
        for key in keys:
            members = self._sets.get(key)
            if members is not None:
                members.pop(member, None)
                if not members:
                    del self._sets[key]

    # Concurrency leases (C1-C4).

    def _acquire(
        self, member: str, sets: list[str], limits: list[int], ttl_ms: int
    ) -> Decision:
        with self._lock:
            now = self.clock()
            for position, (key, limit) in enumerate(zip(sets, limits, strict=True)):
                self._prune(key, upto=now)
                members = self._sets.get(key, {})
                if len(members) - (member in members) >= limit:
                    return lease_refused(position + 1, limits)
            for key in sets:
                self._sets.setdefault(key, {})[member] = now + ttl_ms
            return Decision(True)

    def _renew(self, member: str, sets: list[str], ttl_ms: int) -> bool:
        with self._lock:
            now = self.clock()
            for key in sets:
                score = self._sets.get(key, {}).get(member)
                if score is None or score <= now:
                    self._remove(sets, member)
                    return False
            for key in sets:
                self._sets[key][member] = now + ttl_ms
            return True

    def _release(self, member: str, sets: list[str]) -> None:
        with self._lock:
            self._remove(sets, member)

    def quota_generation(self, account_id: int) -> int:
        with self._lock:
            return int(self._get(self.keys.generation(account_id), self.clock()) or 0)

    # Quota mirrors (Q5-Q11).

    def _reserve(
        self,
        keys: QuotaKeys,
        amount: int,
        limit: int | None,
        partial: bool,
        holder: str | None,
    ) -> QuotaGrant | None:
        key = keys.quota
        with self._lock:
            now = self.clock()
            value = self._get(key, now)
            if value is None:
                return None
            used = int(value)
            if limit is None:
                grant, remaining = amount, None
            else:
                left = max(limit - used, 0)
                grant = (
                    min(amount, left) if partial else (amount if amount <= left else 0)
                )
                remaining = left - grant
            if grant:
                self._values[key] = (used + grant, self._ttl_of(key))
                if holder is not None:
                    held = self._hashes.setdefault(keys.reservations, {})
                    held[holder] = held.get(holder, 0) + grant
            return QuotaGrant(grant, remaining)

    def _settle(
        self, keys: QuotaKeys, holder: str, outstanding: int, delta: int
    ) -> None:
        key, reservations, generation = keys.quota, keys.reservations, keys.generation
        with self._lock:
            now = self.clock()
            value = self._get(key, now)
            if value is not None and delta:
                self._values[key] = (int(value) + delta, self._ttl_of(key))
            held = self._hashes.get(reservations, {})
            if outstanding > 0 and holder in held:
                held[holder] = outstanding
            else:
                held.pop(holder, None)
            current = int(self._get(generation, now) or 0)
            self._set(generation, current + 1, ttl_ms=GENERATION_TTL_MS, now=now)

    def _adjust(self, quota: str, delta: int) -> None:
        with self._lock:
            value = self._get(quota, self.clock())
            if value is not None:
                self._values[quota] = (int(value) + delta, self._ttl_of(quota))

    def _seed(self, quota: str, used: int) -> int:
        with self._lock:
            now = self.clock()
            value = self._get(quota, now)
            if value is None:
                self._set(quota, used, ttl_ms=QUOTA_MIRROR_TTL_MS, now=now)
                return used
            return int(value)

    def _reconcile(self, keys: QuotaKeys, used: int, generation: int) -> bool | None:
        key = keys.quota
        with self._lock:
            now = self.clock()
            if self._get(key, now) is None:
                return None
            if int(self._get(keys.generation, now) or 0) != generation:
                return False
            self._prune(keys.leases, upto=now)
            live = self._sets.get(keys.leases, {})
            held = self._hashes.get(keys.reservations, {})
            for holder in [h for h in held if holder_member(h) not in live]:
                del held[holder]
            self._values[key] = (used + sum(held.values()), self._ttl_of(key))
            return True

    # Key versions (A5).

    def key_version(self, key_id: UUID) -> int | None:
        with self._lock:
            value = self._get(self.keys.key_version(key_id), self.clock())
            return None if value is None else int(value)

    def set_key_version(self, key_id: UUID, version: int) -> int:
        key = self.keys.key_version(key_id)
        with self._lock:
            now = self.clock()
            current = self._get(key, now)
            if current is not None and int(current) >= version:
                return int(current)
            self._set(key, version, ttl_ms=KEY_VERSION_TTL_MS, now=now)
            return version

    def key_ids(self) -> list[UUID]:
        """The keys whose version this store holds (the embedded version sync reads them)."""
        prefix, suffix = self.keys.key_version(UUID(int=0)).split(str(UUID(int=0)))
        with self._lock:
            now = self.clock()
            names = [k for k in self._values if k.startswith(prefix)]
            live = [k for k in names if self._get(k, now) is not None]
        return [UUID(k[len(prefix) : len(k) - len(suffix)]) for k in live]

    # Housekeeping and locks.

    def sweep(self) -> int:
        with self._lock:
            now = self.clock()
            removed = 0
            for key in list(self._sets):
                if key.startswith("cc:"):
                    removed += self._prune(key, upto=now)
                else:  # a request log: Redis lets it expire after the window
                    self._prune(key, upto=now - self.rpm_window_ms)
            for key in [
                k for k, (_, exp) in self._values.items() if exp and exp <= now
            ]:
                del self._values[key]
            return removed

    def try_lock(self, name: str, ttl_ms: int) -> str | None:
        key = self.keys.lock(name)
        with self._lock:
            now = self.clock()
            if self._get(key, now) is not None:
                return None
            token = secrets.token_hex(16)
            self._set(key, token, ttl_ms=ttl_ms, now=now)
            return token

    def unlock(self, name: str, token: str) -> None:
        key = self.keys.lock(name)
        with self._lock:
            if self._get(key, self.clock()) == token:
                del self._values[key]
