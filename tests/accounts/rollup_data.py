"""Random usage records and a direct GROUP BY of them, to check rollups against (G6).

Shared by the in-process tests and the PostgreSQL child process.
"""

from __future__ import annotations

import random
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from accounts import histogram
from accounts.models.api_keys import ApiKey
from accounts.models.usage import UsageRecord
from accounts.services.quota import period_of
from accounts.services.rollups import MEASURES, floor_bucket

STATUSES = ["started", "completed", "cancelled", "failed", "abandoned"]


def recent_morning() -> datetime:
    """10:25 UTC two days ago: the ``now`` of rollup tests. A fixed date would age out of
    record retention (hours older than it are never rebuilt), failing the tests weeks
    later; two days back leaves the default windows (yesterday, today) in the past."""
    day = datetime.now(UTC) - timedelta(days=2)
    return day.replace(hour=10, minute=25, second=0, microsecond=0)


def random_records(
    keys: list[ApiKey], *, since: datetime, hours: int, count: int, seed: int = 7
) -> list[UsageRecord]:
    """``count`` records started within ``hours`` after ``since``; whole-ms times."""
    rng = random.Random(seed)
    records = []
    for _ in range(count):
        key = rng.choice(keys)
        endpoint = rng.choice(["tts", "asr"])
        started = since + timedelta(milliseconds=rng.randrange(hours * 3_600_000))
        status = rng.choice(STATUSES)
        ended = (
            None
            if status == "started"
            else started + timedelta(milliseconds=rng.randrange(1, 90_000))
        )
        tts = endpoint == "tts"
        items = 0 if tts else rng.randrange(5)
        latencies = [rng.randrange(1, 4_000) for _ in range(items)]
        hist = histogram.empty()
        for latency in latencies:
            histogram.observe(hist, latency)
        records.append(
            UsageRecord(
                id=uuid.UUID(int=rng.getrandbits(128), version=4),
                stream_id=uuid.UUID(int=rng.getrandbits(128), version=4),
                request_id=f"r{rng.randrange(10**6)}",
                account_id=key.account_id,
                api_key_id=key.id,
                endpoint=endpoint,
                route=rng.choice(["tts_ws", "tts_rest"]) if tts else "asr_realtime",
                model=rng.choice(["model-a", "model-b"]),
                status=status,
                error_code=rng.choice(["x", "y"]) if status == "failed" else "",
                started_at=started,
                ended_at=ended,
                last_checkpoint_at=ended or started,
                period=period_of(started),
                instance="test:1",
                tts_chars_in=rng.randrange(500) if tts else 0,
                tts_audio_out_ms=rng.randrange(60_000) if tts else 0,
                ttfb_ms=rng.choice([None, rng.randrange(1, 900)]) if tts else None,
                rtf=None,
                asr_audio_in_ms=0 if tts else rng.randrange(120_000),
                asr_chars_out=0 if tts else rng.randrange(900),
                asr_items=items,
                asr_latency_ms_sum=sum(latencies),
                asr_latency_ms_max=max(latencies, default=0),
                asr_latency_hist=hist if items else [],
            )
        )
    return records


def expected_rollups(
    records: list[UsageRecord], granularity: str, since: datetime, until: datetime
) -> dict[tuple, dict[str, int]]:
    """What the rollup rows of ``[since, until)`` must hold, computed record by record:
    ended records only, each weighted by the requests it stands for (issue 30)."""
    rows: dict[tuple, dict[str, int]] = defaultdict(lambda: dict.fromkeys(MEASURES, 0))
    for r in records:
        if not since <= r.started_at < until or r.status == "started":
            continue
        key = (
            floor_bucket(r.started_at, granularity),
            r.account_id,
            r.api_key_id,
            r.endpoint,
            r.route,
            r.model,
            r.error_code,
        )
        row = rows[key]
        row["requests"] += r.requests
        row[r.status] += r.requests
        for name in (
            "tts_chars_in",
            "tts_audio_out_ms",
            "asr_audio_in_ms",
            "asr_chars_out",
            "asr_items",
            "asr_latency_ms_sum",
        ):
            row[name] += getattr(r, name)
        if r.endpoint == "tts" and r.ended_at is not None:
            row["tts_duration_ms"] += (r.ended_at - r.started_at) // timedelta(
                milliseconds=1
            )
        for name, count in zip(
            histogram.ASR_LATENCY_FIELDS, r.asr_latency_hist or [], strict=False
        ):
            row[name] += count
        if r.ttfb_ms is not None:
            row[histogram.TTFB_FIELDS[histogram.bin_index(r.ttfb_ms)]] += 1
            row["ttfb_ms_sum"] += r.ttfb_ms
            row["ttfb_count"] += 1
            row["ttfb_ms_max"] = max(row["ttfb_ms_max"], r.ttfb_ms)
        row["asr_latency_ms_max"] = max(row["asr_latency_ms_max"], r.asr_latency_ms_max)
    return dict(rows)


def stored_rollups(
    granularity: str, account_id: int | None = None
) -> dict[tuple, dict[str, int]]:
    """The rollup rows in the database, keyed like ``expected_rollups``."""
    from accounts.models.rollups import UsageRollup

    rows = UsageRollup.objects.filter(granularity=granularity)
    if account_id is not None:
        rows = rows.filter(account_id=account_id)
    return {
        (
            row.bucket_start,
            row.account_id,
            row.api_key_id,
            row.endpoint,
            row.route,
            row.model,
            row.error_code,
        ): {name: getattr(row, name) for name in MEASURES}
        for row in rows
    }
