"""Quota overrides, top-ups and counter corrections enforced across two gateway processes
on one Redis and one PostgreSQL database (issue 32).

Two spender processes meter TTS characters through admission while a third, the operator,
changes the account's quota through the services. Every change reaches both spenders at
their next connection (the key versions it bumps, A6), and the counter stays the sum of the
records and the corrections.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import child_env
from tests.support.children import Child

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


@pytest.fixture
def start(pg_database: str, redis_url: str, tmp_path: Path) -> Iterator[Any]:
    """``start(scenario, args)``: a child on the shared database and Redis."""
    children: list[Child] = []
    env = child_env(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=pg_database,
        REDIS_URL=redis_url,
        REDIS_KEY_PREFIX=f"q{uuid.uuid4().hex[:8]}:",
        DATA_DIR=str(tmp_path),
        LOG_LEVEL="WARNING",
    )

    def launch(scenario: str, args: dict[str, Any]) -> Child:
        log = tmp_path / f"child{len(children)}.log"
        child = Child(
            "tests.accounts.quota_child", scenario, args, env, log, timeout=30
        )
        children.append(child)
        return child

    yield launch
    for child in children:
        child.stop()


def test_overrides_and_top_ups_hold_across_two_gateway_processes(
    start, pg_database
) -> None:
    account = start("setup", {"chars": 100}).until("raw")
    a, b = (start("spend", {"raw": account["raw"]}) for _ in range(2))
    operator = start("operator", {"account_id": account["account_id"]})
    for child in (a, b, operator):
        child.until("ready")

    def spend(child: Child, chars: int) -> str:
        child.send(json.dumps({"chars": chars}))
        return child.until("result")["result"]

    def change(**command: Any) -> int:
        operator.send(json.dumps(command))
        return operator.until("done")["done"]

    assert spend(a, 60) == "ok"
    assert spend(b, 60) == "quota_exceeded"
    assert spend(b, 40) == "ok"
    assert spend(a, 1) == "quota_exceeded"

    top_up = change(op="top_up", amount=50, reason="launch week")
    assert spend(a, 30) == "ok"
    assert spend(b, 30) == "quota_exceeded"
    assert spend(b, 20) == "ok"
    assert spend(a, 1) == "quota_exceeded"

    change(op="limit", amount=1000, reason="enterprise trial")
    assert spend(b, 901) == "quota_exceeded"
    assert spend(a, 900) == "ok"
    assert spend(b, 1) == "quota_exceeded"

    change(op="adjust", amount=-100, reason="failed batch refunded")
    assert spend(b, 100) == "ok"
    assert spend(a, 1) == "quota_exceeded"

    change(op="end", id=top_up, reason="launch over")
    change(op="adjust", amount=-60, reason="goodwill")
    assert spend(a, 11) == "quota_exceeded"  # 1000 - (1150 - 160) = 10 left
    assert spend(b, 10) == "ok"
    assert spend(a, 1) == "quota_exceeded"

    with psycopg.connect(pg_database) as conn:
        (used,) = conn.execute(
            "SELECT used FROM accounts_quotacounter WHERE account_id = %s",
            [account["account_id"]],
        ).fetchone()
        (records,) = conn.execute(
            "SELECT SUM(tts_chars_in) FROM accounts_usagerecord WHERE account_id = %s",
            [account["account_id"]],
        ).fetchone()
        (adjusted,) = conn.execute(
            "SELECT SUM(amount) FROM accounts_quotaadjustment WHERE account_id = %s",
            [account["account_id"]],
        ).fetchone()
        audit = conn.execute(
            "SELECT action, object_type, reason FROM accounts_auditlog"
            " WHERE account_id = %s AND action LIKE 'quota.%%' ORDER BY id",
            [account["account_id"]],
        ).fetchall()
    assert records == 60 + 40 + 30 + 20 + 900 + 100 + 10
    assert used == records + adjusted == 1000
    assert audit == [
        ("quota.override_created", "quota_override", "launch week"),
        ("quota.override_created", "quota_override", "enterprise trial"),
        ("quota.adjusted", "quota_counter", "failed batch refunded"),
        ("quota.override_ended", "quota_override", "launch over"),
        ("quota.adjusted", "quota_counter", "goodwill"),
    ]
