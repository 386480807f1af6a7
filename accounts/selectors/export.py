"""The CSV export: the chart's buckets, split by key, route and model.

It reads the same rollup rows as the usage page (``usage.filtered_rows``), folds them into
the same buckets, and lists every bucket (a bucket with no usage as one row of zeros), so
its columns add up to the page's totals exactly.
"""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from accounts import buckets as bk
from accounts.models import ApiKey
from accounts.selectors import Scope
from accounts.selectors.usage import (
    Measures,
    UsageFilter,
    add_into,
    aggregates,
    errors_of,
    filtered_rows,
    zero_totals,
)

HEADER = (
    "bucket_start",
    "bucket_end",
    "granularity",
    "partial",
    "api_key_id",
    "key",
    "key_name",
    "route",
    "model",
    "requests",
    "completed",
    "cancelled",
    "failed",
    "abandoned",
    "errors",
    "tts_characters",
    "tts_audio_seconds",
    "asr_audio_seconds",
    "asr_characters",
    "avg_ttfb_ms",
    "avg_asr_latency_ms",
)
# A spreadsheet runs a cell that starts with one of these as a formula (accounts D7).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class ExportRow:
    """One bucket × key × route × model, or an empty bucket (no key)."""

    bucket: bk.Bucket
    key: ApiKey | None
    route: str
    model: str
    measures: Measures


def export_rows(*, scope: Scope, flt: UsageFilter, now: datetime) -> list[ExportRow]:
    """Every row of the export, bucket by bucket."""
    items = flt.buckets(now)
    if not items:
        return []
    grouped = (
        filtered_rows(scope=scope, flt=flt, items=items, per_key=True)
        .values("bucket_start", "api_key_id", "route", "model")
        .annotate(**aggregates(histograms=False))
    )
    starts = [b.start for b in items]
    cells: dict[tuple[int, uuid.UUID, str, str], Measures] = {}
    for row in grouped:
        index = bk.bucket_of(starts, row["bucket_start"])
        if index is None or index >= len(items):
            continue
        key = (index, row["api_key_id"], row["route"], row["model"])
        add_into(cells.setdefault(key, zero_totals()), row)
    keys = ApiKey.objects.in_bulk({key_id for _, key_id, _, _ in cells})
    rows = [
        ExportRow(items[index], keys[key_id], route, model, measures)
        for (index, key_id, route, model), measures in cells.items()
    ]
    used = {index for index, _, _, _ in cells}
    rows += [
        ExportRow(bucket, None, "", "", zero_totals())
        for index, bucket in enumerate(items)
        if index not in used
    ]
    rows.sort(key=lambda r: (r.bucket.start, r.key.display if r.key else "", r.route))
    return rows


def safe_cell(value: str) -> str:
    """A text cell a spreadsheet will not run as a formula."""
    return "'" + value if value.startswith(FORMULA_PREFIXES) else value


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.3f}"


def _average(total: int, count: int) -> str:
    return f"{total / count:.1f}" if count else ""


def csv_line(row: ExportRow, width: str) -> list[str]:
    """One CSV line of ``row`` (times in the viewer's zone, with their offset)."""
    m = row.measures
    key = row.key
    return [
        row.bucket.start.isoformat(),
        row.bucket.end.isoformat(),
        width,
        "true" if row.bucket.partial else "false",
        str(key.id) if key else "",
        safe_cell(key.display) if key else "",
        safe_cell(key.name) if key else "",
        row.route,
        safe_cell(row.model),
        *(
            str(m[name])
            for name in ("requests", "completed", "cancelled", "failed", "abandoned")
        ),
        str(errors_of(m)),
        str(m["tts_chars_in"]),
        _seconds(m["tts_audio_out_ms"]),
        _seconds(m["asr_audio_in_ms"]),
        str(m["asr_chars_out"]),
        _average(m["ttfb_ms_sum"], m["ttfb_count"]),
        _average(m["asr_latency_ms_sum"], m["asr_items"]),
    ]


def csv_text(rows: list[ExportRow], *, width: str, tz_name: str) -> Iterator[str]:
    """The export as CSV lines; bucket times are written in the viewer's zone."""
    tz = bk.zone(tz_name)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(HEADER)
    for row in rows:
        local = ExportRow(
            bk.Bucket(
                row.bucket.start.astimezone(tz),
                row.bucket.end.astimezone(tz),
                row.bucket.label,
                row.bucket.partial,
            ),
            row.key,
            row.route,
            row.model,
            row.measures,
        )
        writer.writerow(csv_line(local, width))
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    if buffer.getvalue():
        yield buffer.getvalue()
