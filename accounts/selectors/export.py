"""The CSV export: the chart's buckets, split by key, route and model, streamed.

It reads the same rollup rows as the usage page (``sources.filtered_rows``), bucketed
the same way (``bucketing.bucketed``: in SQL wherever the zone allows), and lists every
bucket (a bucket with no usage as one row of zeros), so its columns add up to the page's
totals exactly. Rows come from the database in bucket order and are written a bucket at a time:
memory bounded by one bucket. A line is text put together from pieces encoded once (a
bucket's times, a key's columns, a route and model, each by the ``csv`` module) and its
numbers, which need no quoting: no object, ``csv`` call or zone conversion per row.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import connections
from django.db.models import BigIntegerField, CharField, QuerySet, Sum
from django.db.models.functions import Cast
from django.utils.dateparse import parse_datetime

from accounts import buckets as bk
from accounts.models.api_keys import ApiKey
from accounts.models.rollups import OUTCOME_COUNTS
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
    *OUTCOME_COUNTS,
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
LINE_END = "\r\n"  # the csv module's (its "excel" dialect)
# How many rows are fetched from the database at a time.
CHUNK_ROWS = 2000


def safe_cell(value: str) -> str:
    """A text cell a spreadsheet will not run as a formula."""
    return "'" + value if value.startswith(FORMULA_PREFIXES) else value


def _measures_text(sums: Sequence[int]) -> str:
    """The measure columns of one line as CSV text, from ``SUMS`` in order (numbers and
    empty cells only: none needs quoting). Averages are empty where nothing was measured."""
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
    ttfb = f"{ttfb_sum / ttfb_count:.1f}" if ttfb_count else ""
    latency = f"{latency_sum / items:.1f}" if items else ""
    return (
        f"{requests},{completed},{cancelled},{failed},{abandoned},"
        f"{failed + abandoned},"  # errors (accounts D4)
        f"{chars},{audio_out / 1000:.3f},{audio_in / 1000:.3f},{asr_chars},"
        f"{ttfb},{latency}"
    )


Group = tuple[str, str, str]  # key id as text, route, model


class _Text:
    """CSV text of what repeats on many lines, each encoded once by the ``csv`` module
    itself: a bucket's times, and a cell's key, route and model columns with what its
    lines sort by (the key's short form, the route, the model)."""

    def __init__(self) -> None:
        self.buffer = io.StringIO()
        self.writer = csv.writer(self.buffer)
        self.columns: dict[Group, str] = {}
        self.order: dict[Group, tuple[str, str, str]] = {}

    def cells(self, *values: Any) -> str:
        """``values`` as they stand in a CSV line of several cells, without line end."""
        self.buffer.seek(0)
        self.buffer.truncate()
        self.writer.writerow(values)
        return self.buffer.getvalue().removesuffix(LINE_END)

    def add(self, groups: Iterable[Group]) -> None:
        """Encode cells not seen yet, reading their keys."""
        groups = [g for g in groups if g not in self.columns]
        if not groups:
            return
        keys = ApiKey.objects.in_bulk({key_id for key_id, _, _ in groups})
        # The database sends a key id dashed (PostgreSQL) or as 32 hex digits.
        by_text = {text: k for k in keys.values() for text in (str(k.id), k.id.hex)}
        for group in groups:
            key_id, route, model = group
            key = by_text[key_id]
            display, name, cell = (safe_cell(v) for v in (key.display, key.name, model))
            self.columns[group] = self.cells(str(key.id), display, name, route, cell)
            self.order[group] = (display, route, cell)


def _bucket_text(
    bucket: bk.Bucket,
    cells: dict[Group, Sequence[int]],
    text: _Text,
    width: str,
    tz: Any,
) -> str:
    """The lines of one bucket: one per key × route × model, by key, route and model, or
    one of zeros."""
    prefix = text.cells(
        bucket.start.astimezone(tz).isoformat(),
        bucket.end.astimezone(tz).isoformat(),
        width,
        "true" if bucket.partial else "false",
    )
    if not cells:  # no key, route or model: five empty cells
        return f"{prefix},,,,,,{_measures_text(EMPTY)}{LINE_END}"
    text.add(cells)
    columns = text.columns
    return "".join(
        [
            f"{prefix},{columns[g]},{_measures_text(cells[g])}{LINE_END}"
            for g in sorted(cells, key=text.order.__getitem__)
        ]
    )


def _moment(text: str) -> datetime:
    """A stored instant sent as text: with its offset (PostgreSQL), or naive UTC."""
    value = parse_datetime(text)
    if value is None:
        raise ValueError(f"not a datetime: {text!r}")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _grouped_rows(
    scope: Scope, flt: UsageFilter, items: Sequence[bk.Bucket]
) -> Iterator[tuple[Any, ...]]:
    """``(bucket index, (key id text, route, model), SUMS)`` in bucket order, in chunks;
    a cell of an hour may come in several rows (one per error code), to be added up."""
    rows, locate = bucketed(
        filtered_rows(scope=scope, flt=flt, items=items, per_key=True),
        source=source_granularity(items),
        tz=flt.tz,
        width=flt.width,
        items=items,
    )
    if flt.width != "hour":  # a row per day × key × route × model: few
        grouped = (
            rows.values(*GROUP)
            .annotate(**{name: Cast(Sum(name), BigIntegerField()) for name in SUMS})
            .order_by("bucket")
        )
        for row in _raw_rows(grouped.values_list(*GROUP, *SUMS), len(GROUP)):
            index = locate(row[0])
            if index is not None:
                yield index, (str(row[1]), row[2], row[3]), row[4:]
        return
    # Hour buckets are a row per hour × key × route × model (× error code), tens of
    # thousands. They come as stored, in the order of the (account, granularity,
    # bucket_start) index: no GROUP BY, whose sort on text columns was most of the query,
    # and export_csv adds up the rows of one cell. The bucket and the key id come as text,
    # each distinct bucket parsed once, instead of a datetime and a UUID built for every row.
    stored = rows.annotate(
        bucket_text=Cast("bucket", CharField()),
        key_text=Cast("api_key_id", CharField()),
    ).order_by("bucket")
    indexes: dict[str, int | None] = {}
    columns = ("bucket_text", "key_text", "route", "model")
    for row in _raw_rows(stored.values_list(*columns, *SUMS), 0):
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
    Django's converters: the sums are bigint columns (or cast to bigint in SQL) and arrive
    as ints, and converting 13 more columns of every row in Python was most of the
    export's time.
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
    text = _Text()
    yield text.cells(*HEADER) + LINE_END
    items = flt.buckets(now)
    current = 0
    cells: dict[Group, Sequence[int]] = {}
    for index, group, sums in _grouped_rows(scope, flt, items):
        while current < index:  # the buckets before it (those with no rows as zeros)
            yield _bucket_text(items[current], cells, text, flt.width, flt.tz)
            cells = {}
            current += 1
        cell = cells.get(group)
        # A second row of a cell: another error code's, or hours folded into a day in
        # Python (a half-hour DST).
        cells[group] = (
            sums if cell is None else tuple(map(sum, zip(cell, sums, strict=True)))
        )
    while current < len(items):
        yield _bucket_text(items[current], cells, text, flt.width, flt.tz)
        cells = {}
        current += 1
