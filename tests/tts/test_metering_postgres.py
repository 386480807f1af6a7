"""TTS metering on PostgreSQL and Redis, seen from another connection (tts U1–U4, accounts U2,
E7, Q3). The gateway is a child process (``tests/tts/pg_gateway.py``); this test reads the
database with its own psycopg connection, as another process or an operator would."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import child_env
from tests.support.children import Child

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]  # subprocesses

TIMEOUT = 30.0


@pytest.fixture
def gateway(pg_database: str, redis_url: str, tmp_path: Path) -> Iterator[Any]:
    """``gateway(scenario, args)`` starts a child on the shared PostgreSQL and Redis."""
    children: list[Child] = []
    prefix = f"x{uuid.uuid4().hex[:8]}"
    env = child_env(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=pg_database,
        REDIS_URL=redis_url,
        REDIS_KEY_PREFIX=f"{prefix}:",
        CHANNEL_PREFIX=prefix,
        DATA_DIR=str(tmp_path),
        LOG_LEVEL="WARNING",
        USAGE_CHECKPOINT_SECONDS=60,
    )

    def start(scenario: str, args: dict[str, Any] | None = None) -> Child:
        child = Child(
            "tests.tts.pg_gateway",
            scenario,
            args or {},
            env,
            tmp_path / f"child{len(children)}.log",
            timeout=TIMEOUT,
        )
        children.append(child)
        return child

    yield start
    for child in children:
        child.stop()


def query(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def record(url: str, request_id: str) -> dict[str, Any]:
    fields = (
        "status error_code close_code tts_chars_in tts_audio_out_ms ttfb_ms rtf"
    ).split()
    rows = query(
        url,
        f"SELECT {', '.join(fields)} FROM accounts_usagerecord WHERE request_id = %s",
        request_id,
    )
    assert len(rows) == 1, rows
    return dict(zip(fields, rows[0], strict=True))


def chars_used(url: str, account_id: int) -> int:
    rows = query(
        url,
        "SELECT COALESCE(SUM(used), 0) FROM accounts_quotacounter"
        " WHERE account_id = %s AND metric = 'tts_characters'",
        account_id,
    )
    return int(rows[0][0])


def test_tts_u1_u2_u4_record_visible_before_the_first_frame_and_equal_to_complete(
    gateway: Any,
    pg_database: str,
) -> None:
    account = gateway("setup", {"monthly_tts_characters": 1000}).until("raw")
    text = "Hello world. How are you today?"
    child = gateway(
        "stream",
        {
            "raw": account["raw"],
            "pause_at_first_frame": True,
            "chunk_delay_s": 0.02,
            "messages": [
                {"text": text, "request_id": "pg-1", "keep_alive": True},
                {
                    "text": "x" * 500,
                    "request_id": "pg-2",
                    "format": "pcm",
                    "cancel_after_frames": 3,
                },
            ],
        },
    )
    assert child.until("first_frame")["first_frame"] == 44  # the WAV header frame
    seen = record(pg_database, "pg-1")  # from this test's own connection (accounts U2)
    assert seen["status"] == "started"
    child.send()
    result = child.until("result")
    completes = {
        e["request_id"]: e for e in result["events"] if e["event"] == "complete"
    }
    assert result["close"] == 1000
    first, second = record(pg_database, "pg-1"), record(pg_database, "pg-2")
    assert (first["status"], second["status"]) == ("completed", "cancelled")
    for got, request_id in ((first, "pg-1"), (second, "pg-2")):
        metrics = completes[request_id]["metrics"]
        assert (got["ttfb_ms"], got["rtf"]) == (metrics["ttfb_ms"], metrics["rtf"])
    # Completed: all its characters; cancelled inside its first 200-character segment:
    # none, as no segment's audio reached the client whole (docs/accounting.md).
    assert (first["tts_chars_in"], second["tts_chars_in"]) == (len(text), 0)
    for got, request_id in ((first, "pg-1"), (second, "pg-2")):
        metrics = completes[request_id]["metrics"]
        assert round(got["tts_audio_out_ms"] / 1000, 2) == pytest.approx(
            metrics["audio_duration_seconds"], abs=0.011
        )
    sent_ms = result["audio_bytes"] // 2 * 1000 // 16000
    metered_ms = first["tts_audio_out_ms"] + second["tts_audio_out_ms"]
    assert sent_ms - 1 <= metered_ms <= sent_ms  # each record floors its own total
    # accounts Q3: the counter holds what the records hold
    assert chars_used(pg_database, account["account_id"]) == len(text)
    open_rows = query(
        pg_database,
        "SELECT count(*) FROM accounts_usagerecord WHERE status = 'started'"
        " AND account_id = %s",
        account["account_id"],
    )
    assert open_rows == [(0,)]


def test_tts_q7_quota_runs_out_on_a_keep_alive_stream(
    gateway: Any,
    pg_database: str,
) -> None:
    account = gateway("setup", {"monthly_tts_characters": 100}).until("raw")
    child = gateway(
        "stream",
        {
            "raw": account["raw"],
            "messages": [
                {"text": "a" * 60, "request_id": "q-1", "keep_alive": True},
                {"text": "b" * 60, "request_id": "q-2", "keep_alive": True},
            ],
        },
    )
    result = child.until("result")
    error = result["events"][-1]
    assert error["event"] == "error" and error["error"]["code"] == "QUOTA_EXCEEDED"
    assert result["close"] == 1008
    assert record(pg_database, "q-1")["tts_chars_in"] == 60
    assert chars_used(pg_database, account["account_id"]) == 60


def test_tts_e7_revocation_in_another_process_stops_the_stream(
    gateway: Any,
    pg_database: str,
) -> None:
    account = gateway("setup").until("raw")
    revoker = gateway("revoke", {"key_id": account["key_id"]})
    revoker.until("ready")
    child = gateway(
        "stream",
        {
            "raw": account["raw"],
            "chunk_delay_s": 0.02,
            "report_after_frames": 3,
            "messages": [{"text": "r" * 3000, "request_id": "pg-revoked"}],
        },
    )
    child.until("streaming")
    revoker.send()
    revoked = revoker.until("revoked")["revoked"]
    result = child.until("result")
    error = result["events"][-1]
    assert error["error"]["code"] == "AUTH_FAILED" and result["close"] == 1008
    stopped_s = error["t"] - revoked
    print(
        f"\nrevocation in another process: TTS stream stopped after {stopped_s:.3f} s"
    )
    assert stopped_s < 1.0
    got = record(pg_database, "pg-revoked")
    assert (got["status"], got["error_code"], got["close_code"]) == (
        "failed",
        "key_revoked",
        1008,
    )
    assert got["tts_audio_out_ms"] == result["audio_bytes"] // 2 * 1000 // 16000
