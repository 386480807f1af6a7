"""What the usage templates and charts show, computed from a ``UsageReport``.

Each number is given twice: ``value``, exact (milliseconds, characters, counts), in a
``data-value`` attribute, and ``text``, rounded for people. Tests and the CSV reconcile on
the exact values.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Any
from zoneinfo import ZoneInfo

from django.utils.safestring import SafeString, mark_safe

from accounts.models.usage import UsageRecord
from accounts.selectors.measures import Measures, errors_of, latency_of
from accounts.selectors.usage import Breakdown, UsageReport


@dataclass(frozen=True)
class Figure:
    """One number on the page: its metric id, exact value and display text."""

    metric: str
    label: str
    value: int | float | None
    text: str


def _seconds(ms: int) -> str:
    return f"{ms / 1000:,.1f} s"


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f} ms"


def figures(measures: Measures) -> list[Figure]:
    """The cards: totals and latency over the whole range."""
    latency = latency_of(measures)
    counts = [
        ("requests", "Requests", measures["requests"]),
        ("errors", "Errors", errors_of(measures)),
        ("tts_chars_in", "TTS characters", measures["tts_chars_in"]),
    ]
    audio = [
        ("tts_audio_out_ms", "TTS audio out"),
        ("asr_audio_in_ms", "ASR audio in"),
    ]
    return [
        *(
            Figure(metric, label, value, f"{value:,}")
            for metric, label, value in counts
        ),
        *(
            Figure(metric, label, measures[metric], _seconds(measures[metric]))
            for metric, label in audio
        ),
        *(
            Figure(name, label, latency[name], _ms(latency[name]))
            for name, label in (
                ("ttfb_p50", "TTFB p50"),
                ("ttfb_p95", "TTFB p95"),
                ("asr_p50", "ASR p50"),
                ("asr_p95", "ASR p95"),
                ("ttfb_avg", "TTFB average"),
                ("asr_avg", "ASR average"),
            )
        ),
    ]


# The columns of every breakdown table: a subset of the cards.
TABLE_METRICS = (
    "requests",
    "errors",
    "tts_chars_in",
    "tts_audio_out_ms",
    "asr_audio_in_ms",
    "ttfb_avg",
)


def table_row(breakdown: Breakdown) -> dict[str, Any]:
    """One breakdown table row: label, key (if any) and its exact and shown numbers."""
    by_metric = {f.metric: f for f in figures(breakdown.measures)}
    return {
        "label": breakdown.label,
        "key": breakdown.key,
        "account": breakdown.account,
        "route": breakdown.route,
        "model": breakdown.model,
        "cells": [by_metric[name] for name in TABLE_METRICS],
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def chart_data(report: UsageReport) -> dict[str, Any]:
    """The charts' data, for ``json_script`` (no inline script, accounts D9)."""
    series = report.series
    latency = [latency_of(m) for m in report.latency]
    return {
        "labels": [b.label for b in report.buckets],
        "partial": [b.partial for b in report.buckets],
        "series": {
            "tts_chars_in": [m["tts_chars_in"] for m in series],
            "tts_audio_out_s": [m["tts_audio_out_ms"] / 1000 for m in series],
            "asr_audio_in_s": [m["asr_audio_in_ms"] / 1000 for m in series],
            "requests": [m["requests"] for m in series],
        },
        "errors": report.errors,
        "days": [d.label for d in report.days],
        "days_partial": [d.partial for d in report.days],
        "latency": {
            name: [_rounded(day[name]) for day in latency]
            for name in ("ttfb_p50", "ttfb_p95", "asr_p50", "asr_p95")
        },
    }


def local_time(moment: datetime, tz: ZoneInfo) -> str:
    """``moment`` as text in ``tz``, with the zone's abbreviation (EST or EDT, CET…).

    Formatted here, not by the template's ``date`` filter, which would convert an aware
    time back to the site's zone (UTC) whatever zone the page names.
    """
    return moment.astimezone(tz).strftime("%Y-%m-%d %H:%M:%S %Z")


def record_row(record: UsageRecord, tz: ZoneInfo) -> dict[str, Any]:
    """One row of the recent-requests table, times in the viewer's zone."""
    tts = record.endpoint == "tts"
    audio_ms = record.tts_audio_out_ms if tts else record.asr_audio_in_ms
    return {
        "id": record.id,
        "started": local_time(record.started_at, tz),
        "request_id": record.request_id,
        "requests": record.requests,
        "close_code": record.close_code,
        "api_key": record.api_key,
        "get_route_display": record.get_route_display(),
        "model": record.model,
        "status": record.status,
        "error_code": record.error_code,
        "endpoint": record.endpoint,
        "tts_chars_in": record.tts_chars_in,
        "asr_chars_out": record.asr_chars_out,
        "audio_seconds": audio_ms / 1000,
        "ttfb_ms": record.ttfb_ms,
        "rtf": record.rtf,
        "asr_latency_avg": record.asr_latency_ms_sum / record.asr_items
        if record.asr_items
        else None,
    }


@dataclass(frozen=True)
class ChartText:
    """A chart's text alternative: a sentence, and its values as a table."""

    metric: str
    caption: str
    summary: str
    columns: list[str]
    rows: list[list[str]]

    def body(self) -> SafeString:
        """The rows as ``<tr>`` elements, the first cell a row header.

        Built here rather than in the template: an hour view has hundreds of rows of
        up to a dozen cells, which the template's loops render ~20× slower (issue 30's
        300 ms page budget).
        """
        return mark_safe(  # noqa: S308 - every cell is escaped here
            "".join(
                f'<tr><th scope="row">{escape(str(row[0]))}</th>'
                + "".join(f"<td>{escape(str(cell))}</td>" for cell in row[1:])
                + "</tr>"
                for row in self.rows
            )
        )


# metric → (caption, unit after a number, decimals); the order of the charts on the page.
SERIES_CHARTS = {
    "tts_chars_in": ("TTS characters", " characters", 0),
    "tts_audio_out_s": ("TTS audio out (s)", " s", 1),
    "asr_audio_in_s": ("ASR audio in (s)", " s", 1),
    "requests": ("Requests", " requests", 0),
}
LATENCY_SERIES = (
    ("ttfb_p50", "TTS TTFB p50"),
    ("ttfb_p95", "TTS TTFB p95"),
    ("asr_p50", "ASR p50"),
    ("asr_p95", "ASR p95"),
)


def _number(value: float | None, decimals: int = 0) -> str:
    return "–" if value is None else f"{value:,.{decimals}f}"


def _series_text(chart: dict[str, Any], metric: str, per: str) -> ChartText:
    caption, unit, decimals = SERIES_CHARTS[metric]
    labels, values = chart["labels"], chart["series"][metric]
    total = sum(values)
    if not total:
        summary = f"None in this range ({len(labels)} {per}s)."
    else:
        peak = max(range(len(values)), key=lambda i: values[i])
        summary = (
            f"{_number(total, decimals)}{unit} over {len(labels)} {per}s; the most, "
            f"{_number(values[peak], decimals)}{unit}, in the {per} of {labels[peak]}."
        )
    rows = [
        [label, _number(v, decimals)] for label, v in zip(labels, values, strict=True)
    ]
    return ChartText(metric, caption, summary, [per.capitalize(), caption], rows)


def _errors_text(chart: dict[str, Any], per: str) -> ChartText:
    codes = sorted(chart["errors"])
    totals = {code: sum(chart["errors"][code]) for code in codes}
    if not any(totals.values()):
        summary = "No errors in this range."
    else:
        by_code = ", ".join(f"{code} {totals[code]:,}" for code in codes)
        summary = f"{sum(totals.values()):,} errors: {by_code}."
    rows = [
        [label, *(f"{chart['errors'][code][i]:,}" for code in codes)]
        for i, label in enumerate(chart["labels"])
    ]
    return ChartText(
        "errors", "Errors by code", summary, [per.capitalize(), *codes], rows
    )


def _latency_text(chart: dict[str, Any]) -> ChartText:
    days, latency = chart["days"], chart["latency"]
    rows = [
        [day, *(_number(latency[name][i]) for name, _ in LATENCY_SERIES)]
        for i, day in enumerate(days)
    ]
    measured = [row for row in rows if any(cell != "–" for cell in row[1:])]
    if not measured:
        summary = "No latency measured in this range."
    else:
        last = measured[-1]
        parts = ", ".join(
            f"{label} {cell} ms"
            for (_, label), cell in zip(LATENCY_SERIES, last[1:], strict=True)
            if cell != "–"
        )
        summary = f"On {last[0]}, the last day with requests: {parts}."
    columns = ["Day", *(f"{label} (ms)" for _, label in LATENCY_SERIES)]
    caption = "Latency per day, p50 / p95 (ms)"
    return ChartText("latency", caption, summary, columns, rows)


def chart_texts(chart: dict[str, Any], width: str) -> list[ChartText]:
    """Every chart's text alternative, in the page's order (from ``chart_data``)."""
    return [
        *(_series_text(chart, metric, width) for metric in SERIES_CHARTS),
        _errors_text(chart, width),
        _latency_text(chart),
    ]
