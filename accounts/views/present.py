"""What the usage templates and charts show, computed from a ``UsageReport``.

Each number is given twice: ``value``, exact (milliseconds, characters, counts), in a
``data-value`` attribute, and ``text``, rounded for people. Tests and the CSV reconcile on
the exact values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from accounts.models import UsageRecord
from accounts.selectors.usage import (
    Breakdown,
    Measures,
    UsageReport,
    errors_of,
    latency_of,
)


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
    return [
        Figure(
            "requests", "Requests", measures["requests"], f"{measures['requests']:,}"
        ),
        Figure("errors", "Errors", errors_of(measures), f"{errors_of(measures):,}"),
        Figure(
            "tts_chars_in",
            "TTS characters",
            measures["tts_chars_in"],
            f"{measures['tts_chars_in']:,}",
        ),
        Figure(
            "tts_audio_out_ms",
            "TTS audio out",
            measures["tts_audio_out_ms"],
            _seconds(measures["tts_audio_out_ms"]),
        ),
        Figure(
            "asr_audio_in_ms",
            "ASR audio in",
            measures["asr_audio_in_ms"],
            _seconds(measures["asr_audio_in_ms"]),
        ),
        Figure("ttfb_p50", "TTFB p50", latency["ttfb_p50"], _ms(latency["ttfb_p50"])),
        Figure("ttfb_p95", "TTFB p95", latency["ttfb_p95"], _ms(latency["ttfb_p95"])),
        Figure("asr_p50", "ASR p50", latency["asr_p50"], _ms(latency["asr_p50"])),
        Figure("asr_p95", "ASR p95", latency["asr_p95"], _ms(latency["asr_p95"])),
    ]


def table_row(breakdown: Breakdown) -> dict[str, Any]:
    """One breakdown table row: label, key (if any) and its exact and shown numbers."""
    m = breakdown.measures
    latency = latency_of(m)
    return {
        "label": breakdown.label,
        "key": breakdown.key,
        "account": breakdown.account,
        "route": breakdown.route,
        "model": breakdown.model,
        "cells": [
            Figure("requests", "Requests", m["requests"], f"{m['requests']:,}"),
            Figure("errors", "Errors", errors_of(m), f"{errors_of(m):,}"),
            Figure(
                "tts_chars_in", "TTS chars", m["tts_chars_in"], f"{m['tts_chars_in']:,}"
            ),
            Figure(
                "tts_audio_out_ms",
                "TTS audio",
                m["tts_audio_out_ms"],
                _seconds(m["tts_audio_out_ms"]),
            ),
            Figure(
                "asr_audio_in_ms",
                "ASR audio",
                m["asr_audio_in_ms"],
                _seconds(m["asr_audio_in_ms"]),
            ),
            Figure(
                "ttfb_p95", "TTFB p95", latency["ttfb_p95"], _ms(latency["ttfb_p95"])
            ),
        ],
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


def record_row(record: UsageRecord, tz: ZoneInfo) -> dict[str, Any]:
    """One row of the recent-requests table, times in the viewer's zone."""
    tts = record.endpoint == "tts"
    audio_ms = record.tts_audio_out_ms if tts else record.asr_audio_in_ms
    return {
        "id": record.id,
        "local_started": record.started_at.astimezone(tz),
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
