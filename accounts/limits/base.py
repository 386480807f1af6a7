"""The one interface to the limits store (accounts B1), and its key layout (B3).

Every operation is atomic in the store and sync: tasks, services and commands call it
directly, async code through ``asyncio.to_thread``. An unreachable store raises
``LimitsUnavailable`` (E4). Times are the store's clock in milliseconds: Redis ``TIME`` for
``RedisLimiter``, an injectable clock for ``MemoryLimiter``.
"""

from __future__ import annotations

import abc
from typing import NamedTuple
from uuid import UUID

# R3: the sliding log's window.
RPM_WINDOW_MS = 60_000
# Q5: a quota mirror outlives its month by one more.
QUOTA_MIRROR_TTL_MS = 62 * 24 * 3600 * 1000
# A5: the version of a key is reloaded from the database when this has passed.
KEY_VERSION_TTL_MS = 7 * 24 * 3600 * 1000
# Q11: the settlement counter and the reservations live as long as a mirror does.
GENERATION_TTL_MS = QUOTA_MIRROR_TTL_MS


class Decision(NamedTuple):
    """The answer of a take or acquire: allowed, else how long until a retry may pass and,
    for a lease, which cap was full."""

    allowed: bool
    retry_after_ms: int = 0
    # A refused lease: the limit of the full set, and whether it was the key's own (E9).
    limit: int = 0
    key_cap: bool = False


class QuotaGrant(NamedTuple):
    """A reservation: what was granted and what remains (None: no limit)."""

    granted: int
    remaining: int | None


class QuotaKeys(NamedTuple):
    """The store keys one quota mirror works with (Q5, Q11)."""

    quota: str
    reservations: str
    generation: str
    leases: str


class Limiter(abc.ABC):
    """Rate logs, leases, quota mirrors and key versions shared by all gateway processes.

    ``key_id`` names the key's own log or lease set; pass it only when the key has its own
    cap (E9). Release and refund take the same ``key_id`` that the take or acquire did.

    The public calls name accounts and keys; each backend implements the ``_``-prefixed
    operations on the store keys they resolve to (``Keys``).
    """

    keys: Keys

    def take_request(
        self,
        *,
        member: str,
        account_id: int,
        account_limit: int,
        key_id: UUID | None = None,
        key_limit: int | None = None,
    ) -> Decision:
        """Take one request token from the account's log and the key's, both or neither (R1)."""
        return self._take(
            member,
            self.keys.rate_logs(account_id, key_id),
            scoped_limits(account_limit, key_id, key_limit),
        )

    def refund_request(
        self, *, member: str, account_id: int, key_id: UUID | None = None
    ) -> None:
        """Give a token back (R5); harmless when it is gone."""
        self._refund(member, self.keys.rate_logs(account_id, key_id))

    def acquire_lease(
        self,
        *,
        member: str,
        account_id: int,
        account_limit: int,
        ttl_ms: int,
        key_id: UUID | None = None,
        key_limit: int | None = None,
    ) -> Decision:
        """Add a lease expiring in ``ttl_ms`` to every set, or to none (C1); a refusal
        names the full set's limit."""
        return self._acquire(
            member,
            self.keys.lease_sets(account_id, key_id),
            scoped_limits(account_limit, key_id, key_limit),
            ttl_ms,
        )

    def renew_lease(
        self, *, member: str, account_id: int, ttl_ms: int, key_id: UUID | None = None
    ) -> bool:
        """Push the lease's expiry out; False when it is missing from any set (C2)."""
        return self._renew(member, self.keys.lease_sets(account_id, key_id), ttl_ms)

    def release_lease(
        self, *, member: str, account_id: int, key_id: UUID | None = None
    ) -> None:
        """Remove the lease (C3); releasing twice is harmless."""
        self._release(member, self.keys.lease_sets(account_id, key_id))

    @abc.abstractmethod
    def quota_generation(self, account_id: int) -> int:
        """How many settlements the account's reservations have had, as far as the store
        remembers (Q11)."""

    def reserve_quota(
        self,
        *,
        account_id: int,
        metric: str,
        period: str,
        amount: int,
        limit: int | None,
        partial: bool,
        holder: str | None = None,
    ) -> QuotaGrant | None:
        """Add a grant to the mirror; None when the mirror is not seeded (Q5–Q8).

        All-or-nothing unless ``partial``, where the grant is ``min(amount, remaining)``.
        ``amount=0`` only reads what remains (Q6). A ``holder`` (``holder_of``) is credited
        with the grant in the account's reservations, which reconciliation counts (Q11).
        """
        assert amount >= 0, amount
        keys = self.keys.quota_keys(account_id, metric, period)
        return self._reserve(keys, amount, limit, partial, holder)

    def settle_quota(
        self,
        *,
        account_id: int,
        metric: str,
        period: str,
        holder: str,
        outstanding: int,
        delta: int = 0,
    ) -> None:
        """After the holder's database write: add ``delta`` to a seeded mirror, leave the
        holder ``outstanding`` (reserved and not yet in the database; 0 drops it) and count
        one settlement (Q9, Q11)."""
        keys = self.keys.quota_keys(account_id, metric, period)
        self._settle(keys, holder, outstanding, delta)

    def adjust_quota(
        self, *, account_id: int, metric: str, period: str, delta: int
    ) -> None:
        """Add ``delta`` to a seeded mirror; a missing mirror stays missing (Q5, Q9)."""
        self._adjust(self.keys.quota(account_id, metric, period), delta)

    def seed_quota(
        self, *, account_id: int, metric: str, period: str, used: int
    ) -> int:
        """Set the mirror to ``used`` unless it exists (``SET NX``); return its value (Q5)."""
        return self._seed(self.keys.quota(account_id, metric, period), used)

    def reconcile_quota(
        self,
        *,
        account_id: int,
        metric: str,
        period: str,
        used: int,
        generation: int,
    ) -> bool | None:
        """Set an existing mirror to ``used`` plus the reservations of holders whose lease
        is live, dropping the others, if ``generation`` is unchanged (Q11).

        True when set, False when a settlement came between (try again), None when there
        is no mirror.
        """
        keys = self.keys.quota_keys(account_id, metric, period)
        return self._reconcile(keys, used, generation)

    @abc.abstractmethod
    def key_version(self, key_id: UUID) -> int | None:
        """The key's version in the store, or None when it is not there (A5)."""

    @abc.abstractmethod
    def set_key_version(self, key_id: UUID, version: int) -> int:
        """Store ``version`` unless a higher one is there; return the stored value (A5, K6)."""

    @abc.abstractmethod
    def sweep(self) -> int:
        """Drop expired leases from every set; return how many went."""

    @abc.abstractmethod
    def try_lock(self, name: str, ttl_ms: int) -> str | None:
        """Take a named lock for ``ttl_ms`` (``SET NX PX``); its token, or None (G7)."""

    @abc.abstractmethod
    def unlock(self, name: str, token: str) -> None:
        """Release a lock if ``token`` still holds it."""

    # What each backend does on the store keys.

    @abc.abstractmethod
    def _take(self, member: str, logs: list[str], limits: list[int]) -> Decision: ...

    @abc.abstractmethod
    def _refund(self, member: str, logs: list[str]) -> None: ...

    @abc.abstractmethod
    def _acquire(
        self, member: str, sets: list[str], limits: list[int], ttl_ms: int
    ) -> Decision: ...

    @abc.abstractmethod
    def _renew(self, member: str, sets: list[str], ttl_ms: int) -> bool: ...

    @abc.abstractmethod
    def _release(self, member: str, sets: list[str]) -> None: ...

    @abc.abstractmethod
    def _reserve(
        self,
        keys: QuotaKeys,
        amount: int,
        limit: int | None,
        partial: bool,
        holder: str | None,
    ) -> QuotaGrant | None: ...

    @abc.abstractmethod
    def _settle(
        self, keys: QuotaKeys, holder: str, outstanding: int, delta: int
    ) -> None: ...

    @abc.abstractmethod
    def _adjust(self, quota: str, delta: int) -> None: ...

    @abc.abstractmethod
    def _seed(self, quota: str, used: int) -> int: ...

    @abc.abstractmethod
    def _reconcile(
        self, keys: QuotaKeys, used: int, generation: int
    ) -> bool | None: ...


def holder_of(stream_id: UUID, record_id: UUID) -> str:
    """The reservations field of one usage record of one leased stream (Q11)."""
    return f"{stream_id}|{record_id}"


def holder_member(holder: str) -> str:
    """The lease member of a holder."""
    return holder.partition("|")[0]


def lease_refused(full: int, limits: list[int]) -> Decision:
    """The refusal of a lease whose ``full``-th set (1-based, ``Keys.lease_sets``) is full."""
    return Decision(False, limit=limits[full - 1], key_cap=full == 2)


def scoped_limits(
    account_limit: int, key_id: UUID | None, key_limit: int | None
) -> list[int]:
    """The limits that go with ``Keys.rate_logs`` or ``Keys.lease_sets``, in their order."""
    if key_id is None:
        return [account_limit]
    assert key_limit is not None, "a key-scoped take or lease needs the key's limit"
    return [account_limit, key_limit]


class Keys:
    """Store key names (B3): one hash tag per account, so scripts stay cluster-safe."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def rate(self, account_id: int, key_id: UUID | None = None) -> str:
        base = f"{self.prefix}rl:{{a:{account_id}}}"
        return base if key_id is None else f"{base}:k:{key_id}"

    def leases(self, account_id: int, key_id: UUID | None = None) -> str:
        base = f"{self.prefix}cc:{{a:{account_id}}}"
        return base if key_id is None else f"{base}:k:{key_id}"

    def rate_logs(self, account_id: int, key_id: UUID | None) -> list[str]:
        """The account's request log, then the key's when it has its own cap (E9)."""
        logs = [self.rate(account_id)]
        if key_id is not None:
            logs.append(self.rate(account_id, key_id))
        return logs

    def lease_sets(self, account_id: int, key_id: UUID | None) -> list[str]:
        """The account's lease set, then the key's when it has its own cap (E9)."""
        sets = [self.leases(account_id)]
        if key_id is not None:
            sets.append(self.leases(account_id, key_id))
        return sets

    def generation(self, account_id: int) -> str:
        return f"{self.prefix}cg:{{a:{account_id}}}"

    def quota(self, account_id: int, metric: str, period: str) -> str:
        return f"{self.prefix}q:{{a:{account_id}}}:{metric}:{period}"

    def reservations(self, account_id: int, metric: str, period: str) -> str:
        return f"{self.prefix}qr:{{a:{account_id}}}:{metric}:{period}"

    def quota_keys(self, account_id: int, metric: str, period: str) -> QuotaKeys:
        return QuotaKeys(
            self.quota(account_id, metric, period),
            self.reservations(account_id, metric, period),
            self.generation(account_id),
            self.leases(account_id),
        )

    def key_version(self, key_id: UUID) -> str:
        return f"{self.prefix}apikey:{key_id}:v"

    def lock(self, name: str) -> str:
        return f"{self.prefix}lock:{name}"
