"""The Limiter contract (accounts B1, B5, R1–R5, C1–C4, Q5–Q11, A5, G7), on both backends.

Every test runs on ``MemoryLimiter`` with an injected clock and, under the ``redis`` marker,
on ``RedisLimiter`` against a real Redis, where time passes by sleeping a few hundred ms.
"""

from __future__ import annotations

import uuid

import pytest
import redis

from accounts.exceptions import LimitsUnavailable
from accounts.limits import QuotaGrant, RedisLimiter
from accounts.limits.redis import LUA_DIR, SCRIPTS
from tests.conftest import free_port

ACCOUNT = 7
KEY = uuid.UUID("00000000-0000-4000-8000-000000000001")
OTHER_KEY = uuid.UUID("00000000-0000-4000-8000-000000000002")
WINDOW = 300  # the store fixture's RPM window, ms


def take(store, *, limit=3, key_id=None, key_limit=None, member=None):
    return store.take_request(
        member=member or uuid.uuid4().hex,
        account_id=ACCOUNT,
        account_limit=limit,
        key_id=key_id,
        key_limit=key_limit,
    )


def acquire(store, member, *, limit=2, ttl_ms=10_000, key_id=None, key_limit=None):
    return store.acquire_lease(
        member=member,
        account_id=ACCOUNT,
        account_limit=limit,
        ttl_ms=ttl_ms,
        key_id=key_id,
        key_limit=key_limit,
    )


def test_b1_every_operation_has_one_lua_file() -> None:
    assert sorted(p.stem for p in LUA_DIR.glob("*.lua")) == sorted(SCRIPTS)


# R1-R5: requests per minute.


def test_r2_at_most_limit_takes_in_the_window(store) -> None:
    assert [take(store).allowed for _ in range(4)] == [True, True, True, False]


def test_r4_denial_carries_retry_after(store) -> None:
    assert take(store, limit=1).allowed
    store.advance(100)
    decision = take(store, limit=1)
    assert not decision.allowed
    if store.backend == "memory":
        assert decision.retry_after_ms == WINDOW - 100
    else:
        assert 1 <= decision.retry_after_ms <= WINDOW - 100


def test_r3_log_slides(store) -> None:
    assert take(store, limit=1).allowed
    store.advance(WINDOW + 50)
    assert take(store, limit=1).allowed


def test_r1_key_and_account_take_both_or_neither(store) -> None:
    assert take(store, limit=5, key_id=KEY, key_limit=2).allowed
    assert take(store, limit=5, key_id=KEY, key_limit=2).allowed
    refused = take(store, limit=5, key_id=KEY, key_limit=2)
    assert not refused.allowed and refused.retry_after_ms >= 1
    # The refusal took nothing from the account: 3 more fit through another key.
    assert [
        take(store, limit=5, key_id=OTHER_KEY, key_limit=5).allowed for _ in range(4)
    ] == [
        True,
        True,
        True,
        False,
    ]


def test_r5_refund_gives_the_token_back(store) -> None:
    assert take(store, limit=1, member="m1").allowed
    assert not take(store, limit=1).allowed
    store.refund_request(member="m1", account_id=ACCOUNT)
    store.refund_request(member="m1", account_id=ACCOUNT)  # harmless twice
    assert take(store, limit=1).allowed


# C1-C4: concurrency leases.


def test_c1_leases_up_to_the_limit(store) -> None:
    assert acquire(store, "s1").allowed and acquire(store, "s2").allowed
    assert not acquire(store, "s3").allowed
    # Re-acquiring a held lease does not count it twice.
    assert acquire(store, "s1").allowed


def test_c1_key_set_and_account_set_both_or_neither(store) -> None:
    assert acquire(store, "k1", limit=3, key_id=KEY, key_limit=1).allowed
    assert not acquire(store, "k2", limit=3, key_id=KEY, key_limit=1).allowed
    assert (
        acquire(store, "a1", limit=3).allowed and acquire(store, "a2", limit=3).allowed
    )
    assert not acquire(store, "a3", limit=3).allowed


def test_c3_release_frees_the_slot_and_twice_is_harmless(store) -> None:
    assert acquire(store, "s1", limit=1).allowed
    store.release_lease(member="s1", account_id=ACCOUNT)
    store.release_lease(member="s1", account_id=ACCOUNT)
    assert acquire(store, "s2", limit=1).allowed


def test_c2_renewal_keeps_and_missing_member_is_lost(store) -> None:
    assert acquire(store, "s1", limit=1, ttl_ms=250, key_id=KEY, key_limit=1).allowed
    store.advance(150)
    assert store.renew_lease(member="s1", account_id=ACCOUNT, ttl_ms=250, key_id=KEY)
    store.advance(150)  # past the first expiry, within the renewed one
    assert not acquire(store, "s2", limit=1).allowed
    store.release_lease(member="s1", account_id=ACCOUNT, key_id=KEY)
    assert not store.renew_lease(
        member="s1", account_id=ACCOUNT, ttl_ms=250, key_id=KEY
    )


def test_c4_unrenewed_lease_expires_by_itself(store) -> None:
    assert acquire(store, "crashed", limit=1, ttl_ms=200).allowed
    assert not acquire(store, "next", limit=1, ttl_ms=200).allowed
    store.advance(250)
    assert not store.renew_lease(member="crashed", account_id=ACCOUNT, ttl_ms=200)
    assert acquire(store, "next", limit=1, ttl_ms=200).allowed


def test_c4_sweep_drops_expired_leases(store) -> None:
    assert acquire(store, "old", limit=5, ttl_ms=100).allowed
    assert acquire(store, "live", limit=5, ttl_ms=10_000).allowed
    store.advance(150)
    assert store.sweep() == 1
    assert store.sweep() == 0
    assert store.renew_lease(member="live", account_id=ACCOUNT, ttl_ms=10_000)


def test_q11_generation_counts_settlements_not_leases(store) -> None:
    assert store.quota_generation(ACCOUNT) == 0
    acquire(store, "s1", limit=1)
    assert store.quota_generation(ACCOUNT) == 0
    settle(store, "s1|r1", outstanding=0)
    settle(store, "s1|r1", outstanding=0)
    assert store.quota_generation(ACCOUNT) == 2


# Q5-Q11: quota mirrors.


def quota(store, amount, *, limit=100, partial=False, period="2026-09", holder=None):
    return store.reserve_quota(
        account_id=ACCOUNT,
        metric="asr_audio_ms",
        period=period,
        amount=amount,
        limit=limit,
        partial=partial,
        holder=holder,
    )


def settle(store, holder, *, outstanding, delta=0):
    store.settle_quota(
        account_id=ACCOUNT,
        metric="asr_audio_ms",
        period="2026-09",
        holder=holder,
        outstanding=outstanding,
        delta=delta,
    )


def seed(store, used, period="2026-09"):
    return store.seed_quota(
        account_id=ACCOUNT, metric="asr_audio_ms", period=period, used=used
    )


def mirror(store, period="2026-09"):
    return quota(store, 0, limit=None, period=period)


def test_q5_mirror_is_never_used_before_it_is_seeded(store) -> None:
    assert quota(store, 10) is None
    store.adjust_quota(
        account_id=ACCOUNT, metric="asr_audio_ms", period="2026-09", delta=5
    )
    assert quota(store, 10) is None
    assert seed(store, 40) == 40
    assert seed(store, 0) == 40  # SET NX


def test_q7_all_or_nothing_and_q6_remaining(store) -> None:
    seed(store, 90)
    assert quota(store, 0) == QuotaGrant(0, 10)
    assert quota(store, 11) == QuotaGrant(0, 10)
    assert quota(store, 10) == QuotaGrant(10, 0)
    assert quota(store, 1) == QuotaGrant(0, 0)


def test_q8_partial_grants_what_fits(store) -> None:
    seed(store, 95)
    assert quota(store, 10, partial=True) == QuotaGrant(5, 0)
    assert quota(store, 10, partial=True) == QuotaGrant(0, 0)


def test_q2_no_limit_grants_everything_and_still_counts(store) -> None:
    seed(store, 5)
    assert quota(store, 1_000_000, limit=None) == QuotaGrant(1_000_000, None)
    assert quota(store, 1, limit=1_000_000) == QuotaGrant(0, 0)


def test_q9_adjust_moves_a_seeded_mirror(store) -> None:
    seed(store, 50)
    quota(store, 30)
    store.adjust_quota(
        account_id=ACCOUNT, metric="asr_audio_ms", period="2026-09", delta=-20
    )
    assert quota(store, 0) == QuotaGrant(0, 40)


def test_q4_periods_are_separate_mirrors(store) -> None:
    seed(store, 100, period="2026-09")
    assert quota(store, 1, period="2026-10") is None
    seed(store, 0, period="2026-10")
    assert quota(store, 100, period="2026-10") == QuotaGrant(100, 0)


def reconcile(store, used, generation):
    return store.reconcile_quota(
        account_id=ACCOUNT,
        metric="asr_audio_ms",
        period="2026-09",
        used=used,
        generation=generation,
    )


def test_q11_reconcile_is_the_database_plus_live_reservations(store) -> None:
    assert reconcile(store, 10, 0) is None  # no mirror: nothing to reconcile
    seed(store, 10)
    acquire(store, "live", limit=5)
    acquire(store, "crashed", limit=5, ttl_ms=100)
    quota(store, 20, holder="live|r1")
    quota(store, 30, holder="crashed|r2")  # its gateway dies without settling
    assert quota(store, 0) == QuotaGrant(0, 40)
    store.advance(150)  # the crashed stream's lease expires; the live one holds
    assert reconcile(store, 10, store.quota_generation(ACCOUNT)) is True
    assert quota(store, 0) == QuotaGrant(0, 70)  # 10 in the database + 20 held live
    settle(store, "live|r1", outstanding=5)  # a checkpoint put 15 into the database
    assert reconcile(store, 25, store.quota_generation(ACCOUNT)) is True
    assert quota(store, 0) == QuotaGrant(0, 70)
    settle(store, "live|r1", outstanding=0, delta=-5)  # finished: 5 never used
    assert quota(store, 0) == QuotaGrant(0, 75)
    assert reconcile(store, 25, store.quota_generation(ACCOUNT)) is True
    assert quota(store, 0) == QuotaGrant(0, 75)


def test_q11_reconcile_refuses_when_a_settlement_came_between(store) -> None:
    seed(store, 70)
    acquire(store, "live", limit=5)
    quota(store, 20, holder="live|r1")
    generation = store.quota_generation(ACCOUNT)
    settle(store, "live|r1", outstanding=5)  # after the task read the database
    assert reconcile(store, 10, generation) is False
    assert quota(store, 0) == QuotaGrant(0, 10)  # unchanged: 70 + 20
    assert reconcile(store, 25, store.quota_generation(ACCOUNT)) is True
    assert quota(store, 0) == QuotaGrant(0, 70)


def test_q11_a_settlement_never_revives_a_dropped_reservation(store) -> None:
    seed(store, 0)
    acquire(store, "gone", limit=5, ttl_ms=100)
    quota(store, 20, holder="gone|r1")
    store.advance(150)
    assert reconcile(store, 0, store.quota_generation(ACCOUNT)) is True
    settle(store, "gone|r1", outstanding=20)  # a late checkpoint of the lost stream
    assert reconcile(store, 0, store.quota_generation(ACCOUNT)) is True
    assert quota(store, 0) == QuotaGrant(0, 100)


# A5, K6: key versions.


def test_a5_key_version_only_moves_up(store) -> None:
    assert store.key_version(KEY) is None
    assert store.set_key_version(KEY, 2) == 2
    assert store.set_key_version(KEY, 1) == 2  # a late, older write is ignored
    assert store.key_version(KEY) == 2
    assert store.set_key_version(KEY, 3) == 3
    assert store.key_version(OTHER_KEY) is None


# G7: single-flight locks.


def test_g7_lock_is_exclusive_and_expires(store) -> None:
    token = store.try_lock("rollup", 200)
    assert token and store.try_lock("rollup", 200) is None
    store.unlock("rollup", "not-the-token")
    assert store.try_lock("rollup", 200) is None
    store.unlock("rollup", token)
    assert store.try_lock("rollup", 200)
    store.advance(250)
    assert store.try_lock("rollup", 200)


# B3, E4: Redis specifics.


@pytest.mark.redis
def test_b3_keys_share_the_account_hash_tag(redis_url) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    store = RedisLimiter(client, prefix="veena:")
    store.take_request(
        member="m", account_id=7, account_limit=5, key_id=KEY, key_limit=5
    )
    store.acquire_lease(
        member="s", account_id=7, account_limit=5, ttl_ms=1000, key_id=KEY, key_limit=5
    )
    store.seed_quota(account_id=7, metric="asr_audio_ms", period="2026-09", used=0)
    quota_args = {"account_id": 7, "metric": "asr_audio_ms", "period": "2026-09"}
    store.reserve_quota(**quota_args, amount=5, limit=None, partial=True, holder="s|r")
    store.settle_quota(**quota_args, holder="s|r", outstanding=2)
    store.set_key_version(KEY, 1)
    assert sorted(client.keys("*")) == sorted(
        [
            "veena:rl:{a:7}",
            f"veena:rl:{{a:7}}:k:{KEY}",
            "veena:cc:{a:7}",
            f"veena:cc:{{a:7}}:k:{KEY}",
            "veena:cg:{a:7}",
            "veena:q:{a:7}:asr_audio_ms:2026-09",
            "veena:qr:{a:7}:asr_audio_ms:2026-09",
            f"veena:apikey:{KEY}:v",
        ]
    )
    assert 0 < client.pttl("veena:rl:{a:7}") <= 60_000
    client.close()


def test_e4_unreachable_redis_raises_limits_unavailable() -> None:
    store = RedisLimiter.from_url(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(LimitsUnavailable):
        take(store)
    with pytest.raises(LimitsUnavailable):
        store.key_version(KEY)
