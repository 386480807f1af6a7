"""Limits and revocation across gateway processes sharing Redis and PostgreSQL.

Each gateway is a child process (``tests/accounts/gateway_child.py``) on the same Redis and
the same PostgreSQL database, created and migrated once for this module (accounts A6, E7,
R2, C1, C4, U10, G6, V2, V4).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import child_env, manage
from tests.support.children import Child

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

TIMEOUT = 20.0


@pytest.fixture
def gateway(pg_database: str, redis_url: str, tmp_path: Path) -> Iterator[Any]:
    """``gateway(scenario, args, **env)`` starts a child gateway; all are stopped after."""
    children: list[Child] = []
    prefix = f"x{uuid.uuid4().hex[:8]}:"

    def env(**overrides: object) -> dict[str, str]:
        return child_env(
            DJANGO_SETTINGS_MODULE="tests.settings",
            DATABASE_URL=pg_database,
            REDIS_URL=redis_url,
            REDIS_KEY_PREFIX=prefix,
            DATA_DIR=str(tmp_path),
            LOG_LEVEL="WARNING",
            **overrides,
        )

    def start(
        scenario: str, args: dict[str, Any] | None = None, **overrides: object
    ) -> Child:
        child = Child(
            "tests.accounts.gateway_child",
            scenario,
            args or {},
            env(**overrides),
            tmp_path / f"child{len(children)}.log",
            timeout=TIMEOUT,
        )
        children.append(child)
        return child

    start.env = env
    yield start
    for child in children:
        child.stop()


def setup_account(gateway: Any, **plan: int) -> dict[str, Any]:
    return gateway("setup", plan).event()


def test_a6_e7_revocation_reaches_another_process_within_1s(gateway) -> None:
    account = setup_account(gateway)
    key = account["keys"][0]
    watcher = gateway("watch", {"raw": key["raw"]})
    revoker = gateway("revoke", {"raw": key["raw"], "key_id": key["id"]})
    watcher.until("ready")
    revoker.until("ready")
    watcher.send()
    revoker.send()
    revoked = revoker.until("revoked")
    stopped = watcher.until("stream_stopped")
    refused = watcher.until("connect_refused")
    assert stopped["reason"] == "key_revoked" and refused["reason"] == "invalid_api_key"
    stream_s = stopped["stream_stopped"] - revoked["revoke_started"]
    connect_s = refused["connect_refused"] - revoked["revoke_started"]
    print(
        f"\nrevocation: stream stopped after {stream_s:.3f} s, new connection refused after {connect_s:.3f} s"
    )
    assert stream_s < 1.0 and connect_s < 1.0


def test_r2_c1_e2_limits_hold_across_two_processes(gateway) -> None:
    account = setup_account(gateway, rpm=6, concurrency=4)
    raw = account["keys"][0]["raw"]
    holders = [
        gateway("admit_many", {"raw": raw, "count": 4, "hold": True}) for _ in range(2)
    ]
    for child in holders:
        child.send()
    results = [child.until("admitted") for child in holders]
    assert sum(r["admitted"] for r in results) == 4
    assert sum(r["denied"].get("too_many_streams", 0) for r in results) == 4
    for child in holders:
        child.send("release")
        assert child.until("released")
    # 4 tokens are in the log: the 4 refused connections took none (E2), 2 remain.
    takers = [gateway("admit_many", {"raw": raw, "count": 3}) for _ in range(2)]
    for child in takers:
        child.send()
    results = [child.until("admitted") for child in takers]
    assert sum(r["admitted"] for r in results) == 2
    assert sum(r["denied"].get("rate_limited", 0) for r in results) == 4


def test_c4_u10_killed_process_frees_its_lease_and_its_record_is_reaped(
    gateway, pg_database
) -> None:
    account = setup_account(gateway, concurrency=1)
    raw = account["keys"][0]["raw"]
    fast_lease = {"LEASE_TTL_SECONDS": 2, "LEASE_RENEW_SECONDS": 0.5}
    holder = gateway(
        "hold_and_die", {"raw": raw}, USAGE_CHECKPOINT_SECONDS=60, **fast_lease
    )
    record_id = holder.until("ready")["record_id"]
    prober = gateway("probe", {"raw": raw, "until_admitted": True}, **fast_lease)
    assert prober.event()["state"] == "too_many_streams"
    time.sleep(0.5)  # the holder keeps renewing meanwhile
    killed_at = time.time()
    os.kill(holder.proc.pid, signal.SIGKILL)
    holder.proc.wait(timeout=10)
    admitted = prober.until("state", timeout=10)
    assert admitted["state"] == "admitted"
    freed_s = admitted["t"] - killed_at
    print(f"\nlease of a SIGKILLed process free after {freed_s:.3f} s (TTL 2 s)")
    assert freed_s <= 2.0 + 0.5

    time.sleep(max(0.0, 1.1 - (time.time() - killed_at)))
    reaper = manage(
        "usage_maintenance",
        env=gateway.env(USAGE_STALE_SECONDS=1),
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = reaper.communicate(timeout=60)
    assert reaper.returncode == 0 and "abandoned records reaped: 1" in out
    with psycopg.connect(pg_database) as conn:
        status, audio, items, chars, latency, ended, checkpoint = conn.execute(
            "SELECT status, asr_audio_in_ms, asr_items, asr_chars_out, asr_latency_ms_max,"
            " ended_at, last_checkpoint_at FROM accounts_usagerecord WHERE id = %s",
            [record_id],
        ).fetchone()
        used = conn.execute(
            "SELECT used FROM accounts_quotacounter WHERE account_id = %s"
            " AND metric = 'asr_audio_ms'",
            [account["account_id"]],
        ).fetchone()[0]
    assert (status, audio, items, chars, latency) == ("abandoned", 1000, 1, 11, 120)
    assert ended == checkpoint
    assert used == 1000  # Q3: the counter holds what the record holds


def test_g6_rollups_on_postgres(gateway) -> None:
    account = setup_account(gateway, keys=3)
    result = gateway("rollups", {"account_id": account["account_id"]}).until("rows")
    assert result["rows"] > 0
    assert result["idempotent"] and result["matches"] and result["day_matches"]
