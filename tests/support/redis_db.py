"""One Redis database per test run, so two suites on one machine never flush each other's keys.

The fixtures flush their database before and after each test. A run claims one of the databases
``CANDIDATES`` with ``SET NX`` on a key in database 0, releases it at exit, and a claim left by a
killed run expires after ``CLAIM_TTL_S``. ``REDIS_TEST_URL`` set in the environment wins.
"""

from __future__ import annotations

import atexit
import functools
import os
import socket

import redis

SERVER = "redis://127.0.0.1:6379"
CANDIDATES = range(15, 7, -1)
CLAIM_TTL_S = 3 * 3600
CLAIM_KEY = "veena-test-run:db:{}"


@functools.cache
def redis_test_url() -> str:
    """This run's Redis URL: the environment's, a claimed database, or database 15."""
    if url := os.environ.get("REDIS_TEST_URL"):
        return url
    owner = f"{socket.gethostname()}:{os.getpid()}"
    try:
        client = redis.Redis.from_url(f"{SERVER}/0", socket_timeout=2)
        for db in CANDIDATES:
            if client.set(CLAIM_KEY.format(db), owner, nx=True, ex=CLAIM_TTL_S):
                atexit.register(_release, client, db, owner)
                return f"{SERVER}/{db}"
    except redis.RedisError:
        pass  # unreachable: the fixtures skip (or fail in CI) on their own ping
    return f"{SERVER}/{CANDIDATES[0]}"


def _release(client: redis.Redis, db: int, owner: str) -> None:
    try:
        if client.get(CLAIM_KEY.format(db)) == owner.encode():
            client.delete(CLAIM_KEY.format(db))
    except redis.RedisError:
        pass
