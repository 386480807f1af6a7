"""Rollups kept current as records end (issue 30: fresh numbers, docs/accounting.md).

A record counts in its hourly and daily rows (per key, and per account) from the moment it
reaches a terminal status, in the same transaction: the write that ends it adds what it
contributes, and a later correction (an ``abandoned`` record settled from the journal, a
refusal row that counts one more) adds the difference. The periodic recompute
(``services.rollups``) gives the same rows from the records; it takes the rollup lock
exclusively, every write here takes it shared, so neither ever overwrites the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import connection

from accounts import histogram
from accounts.histogram import ASR_LATENCY_FIELDS, TTFB_FIELDS
from accounts.models.choices import Granularity, UsageStatus
from accounts.models.rollups import (
    ACCOUNT_ROLLUP_KEY,
    ROLLUP_KEY,
    AccountRollup,
    RollupMeasures,
    UsageRollup,
)
from accounts.services.rollups import MAX_FIELDS, SUM_FIELDS, floor_bucket, rollup_lock

# The record's counters each rollup row sums as they are.
COPIED = (
    "tts_chars_in",
    "tts_audio_out_ms",
    "asr_audio_in_ms",
    "asr_chars_out",
    "asr_items",
    "asr_latency_ms_sum",
)
# What a record row must hold to compute its contribution.
ROW_FIELDS = (
    "account_id",
    "api_key_id",
    "endpoint",
    "route",
    "model",
    "error_code",
    "status",
    "requests",
    "started_at",
    "ended_at",
    "ttfb_ms",
    *COPIED,
    "asr_latency_ms_max",
    "asr_latency_hist",
)
Row = Mapping[str, Any]


def tts_duration_ms(row: Row) -> int:
    """A TTS record's wall time in whole ms (the recompute floors per record too)."""
    if row["endpoint"] != "tts" or row["ended_at"] is None:
        return 0
    elapsed = row["ended_at"] - row["started_at"]
    micros = (elapsed.days * 86_400 + elapsed.seconds) * 1_000_000
    return (micros + elapsed.microseconds) // 1000


def contribution(row: Row) -> dict[str, int]:
    """What one record adds to its rollup rows (accounts G1, G3); nothing while started."""
    if row["status"] == UsageStatus.STARTED:
        return {}
    sums = dict.fromkeys(SUM_FIELDS, 0)
    sums["requests"] = sums[str(row["status"])] = int(row["requests"])
    for name in COPIED:
        sums[name] = int(row[name])
    sums["tts_duration_ms"] = tts_duration_ms(row)
    ttfb = row["ttfb_ms"]
    if ttfb is not None:
        sums["ttfb_ms_sum"], sums["ttfb_count"] = int(ttfb), 1
        sums[TTFB_FIELDS[histogram.bin_index(ttfb)]] = 1
    for name, count in zip(
        ASR_LATENCY_FIELDS, row["asr_latency_hist"] or (), strict=False
    ):
        sums[name] = int(count)
    sums["ttfb_ms_max"] = int(ttfb or 0)
    sums["asr_latency_ms_max"] = int(row["asr_latency_ms_max"])
    return sums


def _key(row: Row, granularity: str) -> dict[str, Any]:
    return {
        "granularity": granularity,
        "bucket_start": floor_bucket(row["started_at"], granularity),
        "account_id": row["account_id"],
        "api_key_id": row["api_key_id"],
        "endpoint": row["endpoint"],
        "route": row["route"],
        "model": row["model"],
        "error_code": row["error_code"],
    }


def _upsert(
    table: type[RollupMeasures],
    key: dict[str, Any],
    delta: dict[str, int],
    now: datetime,
) -> None:
    """Add ``delta`` to one row (a max column keeps the larger), creating it if missing."""
    meta = table._meta
    key_fields = ROLLUP_KEY if table is UsageRollup else ACCOUNT_ROLLUP_KEY
    fields = [meta.get_field(name) for name in key_fields]
    columns = [str(field.column) for field in fields]  # type: ignore[union-attr]
    params: list[Any] = [
        field.get_db_prep_value(key[field.attname], connection)  # type: ignore[union-attr]
        for field in fields
    ]
    conflict = list(columns)
    sets = []
    for name in (*SUM_FIELDS, *MAX_FIELDS):
        columns.append(name)
        params.append(delta.get(name, 0))
        if name in MAX_FIELDS:
            larger = "GREATEST" if connection.vendor == "postgresql" else "MAX"
            sets.append(f"{name} = {larger}({meta.db_table}.{name}, excluded.{name})")
        else:
            sets.append(f"{name} = {meta.db_table}.{name} + excluded.{name}")
    columns.append("computed_at")
    params.append(meta.get_field("computed_at").get_db_prep_value(now, connection))
    sets.append("computed_at = excluded.computed_at")
    sql = (
        f"INSERT INTO {meta.db_table} ({', '.join(columns)}) "
        f"VALUES ({', '.join(['%s'] * len(columns))}) "
        f"ON CONFLICT ({', '.join(conflict)}) DO UPDATE SET {', '.join(sets)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def rollup_apply(*, before: Row | None, after: Row, now: datetime) -> None:
    """Add the change of one record's contribution to its four rollup rows (hour and day,
    per key and per account); inside the caller's transaction, which writes the record."""
    old = contribution(before) if before is not None else {}
    new = contribution(after)
    if old == new and (before is None or _key(before, "hour") == _key(after, "hour")):
        return
    rollup_lock(exclusive=False)
    changes: list[tuple[Row, dict[str, int]]] = []
    if before is not None and _key(before, "hour") == _key(after, "hour"):
        changes.append((after, _difference(new, old)))
    else:
        if old and before is not None:
            changes.append((before, _difference({}, old)))
        if new:
            changes.append((after, new))
    for row, delta in changes:
        for granularity in (Granularity.HOUR, Granularity.DAY):
            key = _key(row, granularity)
            _upsert(UsageRollup, key, delta, now)
            _upsert(AccountRollup, key, delta, now)


def _difference(new: dict[str, int], old: dict[str, int]) -> dict[str, int]:
    """``new − old`` for the sums; the maxima are the new ones (a max never shrinks)."""
    delta = {name: new.get(name, 0) - old.get(name, 0) for name in SUM_FIELDS}
    delta.update({name: new.get(name, 0) for name in MAX_FIELDS})
    return delta
