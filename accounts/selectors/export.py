"""The CSV export: the chart's buckets, split by key, route and model, streamed.

It reads the same rollup rows as the usage page (``sources.filtered_rows``), bucketed
the same way (``bucketing.bucketed``: in SQL wherever the zone allows), and lists every
bucket (a bucket with no usage as one row of zeros), so its columns add up to the page's
totals exactly. Rows come from the database in bucket order and are written a bucket at a time:
memory bounded by one bucket. A line is text put together from pieces encoded once (a
bucket's times, a key's columns, a route and model, each by the ``csv`` module) and its
numbers, which need no quoting: the counted columns as the database writes them
(``CountedText``), the two averages formatted here. No object, ``csv`` call or zone
conversion per row.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from django.db import connections
from django.db.models import BigIntegerField, CharField, F, Func, QuerySet, Sum
from django.db.models.functions import Cast

from accounts import buckets as bk
from accounts.models.api_keys import ApiKey
from accounts.models.rollups import OUTCOME_COUNTS
from accounts.selectors import Scope
from accounts.selectors.bucketing import Locate, bucketed
from accounts.selectors.sources import (
    UsageFilter,
    filtered_rows,
    source_granularity,
    stored_moment,
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


# The counted columns of a line (requests … asr_characters) come from these sums, in this
# order; the two averages from AVERAGED.
COUNTED = (
    *OUTCOME_COUNTS,
    "tts_chars_in",
    "tts_audio_out_ms",
    "asr_audio_in_ms",
    "asr_chars_out",
)
AVERAGED = ("ttfb_ms_sum", "ttfb_count", "asr_latency_ms_sum", "asr_items")
GROUP = ("bucket", "api_key_id", "route", "model")
LINE_END = "\r\n"  # the csv module's (its "excel" dialect)
# How many rows are fetched from the database at a time.
CHUNK_ROWS = 2000


def safe_cell(value: str) -> str:
    """A text cell a spreadsheet will not run as a formula."""
    return "'" + value if value.startswith(FORMULA_PREFIXES) else value


class CountedText(Func):
    """The counted columns of a line as CSV text, written by the database: the ``COUNTED``
    values in order, the errors (failed + abandoned, accounts D4) after the outcomes, and
    milliseconds as seconds with three decimals (``1234`` → ``1.234``).

    A week of hours is tens of thousands of lines; formatting their numbers in Python was
    most of the export's time. Integer arithmetic, ``CAST``, ``SUBSTR`` and ``||`` only, so
    SQLite and PostgreSQL write the same text (``counted_text`` is the same in Python).
    """

    output_field = CharField()

    def as_sql(  # type: ignore[override]
        self, compiler: Any, connection: Any, **extra: Any
    ) -> tuple[str, list[Any]]:
        values = []
        for expression in self.get_source_expressions():
            sql, params = compiler.compile(expression)
            values.append((f"CAST({sql} AS BIGINT)", tuple(params)))
        (requests, completed, cancelled, failed, abandoned) = values[:5]
        chars, audio_out, audio_in, asr_chars = values[5:]
        errors = (f"({failed[0]} + {abandoned[0]})", failed[1] + abandoned[1])
        pieces = [
            requests,
            completed,
            cancelled,
            failed,
            abandoned,
            errors,
            chars,
            _seconds_sql(audio_out),
            _seconds_sql(audio_in),
            asr_chars,
        ]
        sql = " || ',' || ".join(f"({piece})" for piece, _ in pieces)
        return f"({sql})", [param for _, params in pieces for param in params]


def _seconds_sql(value: tuple[str, tuple[Any, ...]]) -> tuple[str, tuple[Any, ...]]:
    """Milliseconds as seconds with three decimals, in SQL (``1000 + ms % 1000`` has four
    digits; its last three are the decimals)."""
    sql, params = value
    text = (
        f"(({sql}) / 1000) || '.' || SUBSTR(CAST(1000 + (({sql}) %% 1000) AS TEXT), 2)"
    )
    return text, params + params


def counted_text(values: Sequence[int]) -> str:
    """``CountedText`` in Python, from the ``COUNTED`` values."""
    requests, completed, cancelled, failed, abandoned, chars, out, into, asr = values
    return (
        f"{requests},{completed},{cancelled},{failed},{abandoned},{failed + abandoned},"
        f"{chars},{out // 1000}.{out % 1000:03d},{into // 1000}.{into % 1000:03d},{asr}"
    )


def counted_values(text: str) -> list[int]:
    """The ``COUNTED`` values back from their text (to add up the rows of one cell)."""
    cells = text.split(",")
    del cells[5]  # errors, computed again
    return [int(cell.replace(".", "")) for cell in cells]


# A cell's line after its key columns: the counted text, then the AVERAGED sums.
Cell = tuple[Any, ...]
EMPTY_LINE = counted_text([0] * len(COUNTED)) + ",,"  # averages: nothing measured


def _added(cell: Cell, other: Cell) -> Cell:
    """Two rows of one cell added up: another error code's, or an hour folded into a day."""
    counted = [
        a + b
        for a, b in zip(counted_values(cell[0]), counted_values(other[0]), strict=True)
    ]
    sums = (a + b for a, b in zip(cell[1:], other[1:], strict=True))
    return (counted_text(counted), *sums)


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
    cells: dict[Group, Cell],
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
        return f"{prefix},,,,,,{EMPTY_LINE}{LINE_END}"
    text.add(cells)
    columns = text.columns
    lines = []
    for group in sorted(cells, key=text.order.__getitem__):
        counted, ttfb_sum, ttfb_count, latency_sum, items = cells[group]
        ttfb = f"{ttfb_sum / ttfb_count:.1f}" if ttfb_count else ""
        latency = f"{latency_sum / items:.1f}" if items else ""
        lines.append(f"{prefix},{columns[group]},{counted},{ttfb},{latency}{LINE_END}")
    return "".join(lines)


def _bucket_cells(
    scope: Scope, flt: UsageFilter, items: Sequence[bk.Bucket]
) -> Iterator[tuple[int, dict[Group, Cell]]]:
    """``(bucket index, {(key id text, route, model): Cell})`` for each bucket with rows,
    in bucket order; the rows come from the database in chunks."""
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
            .annotate(
                counted=CountedText(*(Sum(name) for name in COUNTED)),
                **{name: Cast(Sum(name), BigIntegerField()) for name in AVERAGED},
            )
            .order_by("bucket")
        )
        rows_of = _raw_rows(
            grouped.values_list(*GROUP, "counted", *AVERAGED), len(GROUP)
        )
        located = (
            (locate(row[0]), (str(row[1]), row[2], row[3]), row[4:]) for row in rows_of
        )
        yield from _cells_of(located)
        return
    # Hour buckets are a row per hour × key × route × model (× error code), tens of
    # thousands. They come as stored, in the order of the (account, granularity,
    # bucket_start) index: no GROUP BY, whose sort and sums were most of the query; the
    # rows of one cell are added up here. The bucket and the key id come as text, each
    # distinct bucket parsed once, instead of a datetime and a UUID built for every row,
    # and the counted columns as the line's text (``CountedText``).
    stored = rows.annotate(
        bucket_text=Cast("bucket", CharField()),
        key_text=Cast("api_key_id", CharField()),
        counted=CountedText(*(F(name) for name in COUNTED)),
    ).order_by("bucket")
    columns = ("bucket_text", "key_text", "route", "model", "counted", *AVERAGED)
    yield from _cells_of(
        _located_hours(_raw_rows(stored.values_list(*columns), 0), locate)
    )


def _located_hours(
    rows: Iterable[tuple[Any, ...]], locate: Locate
) -> Iterator[tuple[int | None, Group, Cell]]:
    """Hour rows in bucket order with their bucket index, each bucket's text parsed once."""
    last, index = None, None
    for row in rows:
        if row[0] != last:  # the first row of the next hour
            last, index = row[0], locate(stored_moment(row[0]))
        yield index, row[1:4], row[4:]


def _raw_rows(queryset: QuerySet[Any], converted: int) -> Iterator[tuple[Any, ...]]:
    """A ``values_list`` query's rows as the database sends them, in chunks.

    Only the first ``converted`` columns (bucket, key id, route, model) go through
    Django's converters: the rest are text or bigints (columns, or sums cast to bigint in
    SQL) that arrive as they are, and converting every column of every row in Python was
    most of the export's time.
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


def _cells_of(
    located: Iterable[tuple[int | None, Group, Cell]],
) -> Iterator[tuple[int, dict[Group, Cell]]]:
    """Rows in bucket order, each with its bucket index, as the cells of each bucket; the
    rows of one cell added up (another error code's, or hours folded into a day in Python:
    a half-hour DST)."""
    current: int | None = None
    cells: dict[Group, Cell] = {}
    for index, group, cell in located:
        if index is None:
            continue
        if index != current:
            if cells and current is not None:
                yield current, cells
            current, cells = index, {}
        other = cells.get(group)
        cells[group] = cell if other is None else _added(other, cell)
    if cells and current is not None:
        yield current, cells


def export_csv(*, scope: Scope, flt: UsageFilter, now: datetime) -> Iterator[str]:
    """The export as CSV text, a bucket at a time; times in the viewer's zone."""
    text = _Text()
    yield text.cells(*HEADER) + LINE_END
    items = flt.buckets(now)
    current = 0
    for index, cells in _bucket_cells(scope, flt, items):
        while current < index:  # the buckets before it, with no rows: a line of zeros
            yield _bucket_text(items[current], {}, text, flt.width, flt.tz)
            current += 1
        yield _bucket_text(items[index], cells, text, flt.width, flt.tz)
        current = index + 1
    while current < len(items):
        yield _bucket_text(items[current], {}, text, flt.width, flt.tz)
        current += 1
