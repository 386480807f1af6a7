"""The CSV export: the chart's buckets, split by key, route and model, streamed.

It reads the same rollup rows as the usage page (``sources.filtered_rows``), bucketed
the same way (``bucketing.bucketed``: in SQL wherever the zone allows), and lists every
bucket (a bucket with no usage as one row of zeros), so its columns add up to the page's
totals exactly. Rows come from the database in bucket order and are written a bucket at a time,
as tuples: no object per row, and memory bounded by one bucket.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import connections
from django.db.models import BigIntegerField, CharField, QuerySet, Sum
from django.db.models.functions import Cast
from django.utils.dateparse import parse_datetime

from accounts import buckets as bk
from accounts.models.api_keys import ApiKey
from accounts.selectors import Scope
from accounts.selectors.bucketing import bucketed
from accounts.selectors.sources import UsageFilter, filtered_rows, source_granularity

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


# The sums each CSV line is made of, in this order.
SUMS = (
    "requests",
    "completed",
    "cancelled",
    "failed",
    "abandoned",
    "tts_chars_in",
    "tts_audio_out_ms",
    "asr_audio_in_ms",
    "asr_chars_out",
    "ttfb_ms_sum",
    "ttfb_count",
    "asr_latency_ms_sum",
    "asr_items",
)
GROUP = ("bucket", "api_key_id", "route", "model")
EMPTY = (0,) * len(SUMS)
# How many rows are fetched from the database at a time.
CHUNK_ROWS = 2000


def safe_cell(value: str) -> str:
    """A text cell a spreadsheet will not run as a formula."""
    return "'" + value if value.startswith(FORMULA_PREFIXES) else value


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.3f}"


def _average(total: int, count: int) -> str:
    return f"{total / count:.1f}" if count else ""


def _measures_cells(sums: Sequence[int]) -> tuple[Any, ...]:
    """The measure columns of one line, from ``SUMS`` in order."""
    (
        requests,
        completed,
        cancelled,
        failed,
        abandoned,
        chars,
        audio_out,
        audio_in,
        asr_chars,
        ttfb_sum,
        ttfb_count,
        latency_sum,
        items,
    ) = sums
    return (
        requests,
        completed,
        cancelled,
        failed,
        abandoned,
        failed + abandoned,  # errors (accounts D4)
        chars,
        _seconds(audio_out),
        _seconds(audio_in),
        asr_chars,
        _average(ttfb_sum, ttfb_count),
        _average(latency_sum, items),
    )


class _Keys:
    """The key columns of each key id (as text), read once per export."""

    def __init__(self) -> None:
        self.cells: dict[str, tuple[str, str, str]] = {}

    def load(self, key_ids: Sequence[str]) -> None:
        missing = [key_id for key_id in key_ids if key_id not in self.cells]
        for key in ApiKey.objects.in_bulk(missing).values():
            cells = (str(key.id), safe_cell(key.display), safe_cell(key.name))
            # The database sends a key id dashed (PostgreSQL) or as 32 hex digits.
            self.cells[str(key.id)] = self.cells[key.id.hex] = cells


def _bucket_lines(
    bucket: bk.Bucket,
    cells: dict[tuple[str, str, str], Sequence[int]],
    keys: _Keys,
    width: str,
    tz: Any,
) -> list[tuple[Any, ...]]:
    """The lines of one bucket: one per key × route × model, or one of zeros."""
    prefix = (
        bucket.start.astimezone(tz).isoformat(),
        bucket.end.astimezone(tz).isoformat(),
        width,
        "true" if bucket.partial else "false",
    )
    if not cells:
        return [(*prefix, "", "", "", "", "", *_measures_cells(EMPTY))]
    keys.load(list({key_id for key_id, _, _ in cells}))
    lines = [
        (*prefix, *keys.cells[key_id], route, safe_cell(model), *_measures_cells(sums))
        for (key_id, route, model), sums in cells.items()
    ]
    lines.sort(key=lambda line: (line[5], line[7], line[8]))  # key, route, model
    return lines


def _moment(text: str) -> datetime:
    """A stored instant sent as text: with its offset (PostgreSQL), or naive UTC."""
    value = parse_datetime(text)
    if value is None:
        raise ValueError(f"not a datetime: {text!r}")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _grouped_rows(
    scope: Scope, flt: UsageFilter, items: Sequence[bk.Bucket]
) -> Iterator[tuple[Any, ...]]:
    """``(bucket index, (key id text, route, model), SUMS)`` in bucket order, in chunks."""
    rows, locate = bucketed(
        filtered_rows(scope=scope, flt=flt, items=items, per_key=True),
        source=source_granularity(items),
        tz=flt.tz,
        width=flt.width,
        items=items,
    )
    grouped = (
        rows.values(*GROUP)
        .annotate(**{name: Cast(Sum(name), BigIntegerField()) for name in SUMS})
        .order_by("bucket")
    )
    if flt.width != "hour":  # a row per day × key × route × model: few
        for row in _raw_rows(grouped.values_list(*GROUP, *SUMS), len(GROUP)):
            index = locate(row[0])
            if index is not None:
                yield index, (str(row[1]), row[2], row[3]), row[4:]
        return
    # Hour buckets are a row per hour × key × route × model, tens of thousands: the
    # bucket and the key id come as text, each distinct value parsed once, instead of a
    # datetime and a UUID built for every row.
    grouped = grouped.annotate(
        bucket_text=Cast("bucket", CharField()),
        key_text=Cast("api_key_id", CharField()),
    )
    indexes: dict[str, int | None] = {}
    columns = ("bucket_text", "key_text", "route", "model")
    for row in _raw_rows(grouped.values_list(*columns, *SUMS), 0):
        text = row[0]
        if text in indexes:
            index = indexes[text]
        else:
            index = indexes[text] = locate(_moment(text))
        if index is not None:
            yield index, row[1:4], row[4:]


def _raw_rows(queryset: QuerySet[Any], converted: int) -> Iterator[tuple[Any, ...]]:
    """A ``values_list`` query's rows as the database sends them, in chunks.

    Only the first ``converted`` columns (bucket, key id, route, model) go through
    Django's converters: the sums are cast to bigint in SQL and arrive as ints, and
    converting 13 more columns of every row in Python was most of the export's time.
    """
    compiler = queryset.query.get_compiler(using=queryset.db)
    sql, params = compiler.as_sql()
    converters = compiler.get_converters(
        [expression for expression, _, _ in compiler.select[:converted]]
    )
    connection = connections[queryset.db]
    # A server-side cursor (PostgreSQL), unless the database is behind a transaction
    # pooler that cannot hold one (Django's DISABLE_SERVER_SIDE_CURSORS).
    chunked = not connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")
    with connection.chunked_cursor() if chunked else connection.cursor() as cursor:
        cursor.execute(sql, params)
        while chunk := cursor.fetchmany(CHUNK_ROWS):
            if not converters:
                yield from chunk
                continue
            for row in chunk:
                values = list(row)
                for position, (functions, expression) in converters.items():
                    value = values[position]
                    for function in functions:
                        value = function(value, expression, connection)
                    values[position] = value
                yield tuple(values)


def export_csv(*, scope: Scope, flt: UsageFilter, now: datetime) -> Iterator[str]:
    """The export as CSV text, a bucket at a time; times in the viewer's zone."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(HEADER)
    yield buffer.getvalue()
    items = flt.buckets(now)
    keys = _Keys()
    current = 0
    cells: dict[tuple[str, str, str], Sequence[int]] = {}

    def flush(upto: int) -> Iterator[str]:
        """Write the buckets before ``upto`` (those with no rows as zeros)."""
        nonlocal current, cells
        while current < upto:
            buffer.seek(0)
            buffer.truncate()
            writer.writerows(
                _bucket_lines(items[current], cells, keys, flt.width, flt.tz)
            )
            cells = {}
            current += 1
            yield buffer.getvalue()

    for index, group, sums in _grouped_rows(scope, flt, items):
        if index > current:
            yield from flush(index)
        cell = cells.get(group)
        # A second row of a cell: hours folded into a day in Python (a half-hour DST).
        cells[group] = (
            sums if cell is None else tuple(map(sum, zip(cell, sums, strict=True)))
        )
    yield from flush(len(items))
