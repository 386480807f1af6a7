"""Measures: what rollup rows sum, as plain dicts, and the figures read off them.

A ``Measures`` dict holds one value per rollup measure (``services.rollups``): sums add, and
maxima take the larger, so measures of several rows or buckets merge with ``add_into``.
"""

from __future__ import annotations

from typing import Any

from django.db.models import BigIntegerField, Max, Sum
from django.db.models.functions import Cast

from accounts.histogram import ASR_LATENCY_FIELDS, TTFB_FIELDS, percentile
from accounts.services.rollups import MAX_FIELDS, MEASURES, SUM_FIELDS

Measures = dict[str, int]


def zero() -> Measures:
    """Measures with nothing counted."""
    return dict.fromkeys(MEASURES, 0)


_SUMMED, _MAXED = frozenset(SUM_FIELDS), frozenset(MAX_FIELDS)
HISTOGRAMS = (*TTFB_FIELDS, *ASR_LATENCY_FIELDS)
# What tables and the CSV show: everything but the latency histograms.
TOTALS = tuple(name for name in SUM_FIELDS if name not in HISTOGRAMS)


def add_into(total: Measures, row: dict[str, Any]) -> None:
    """Add one aggregate row to ``total`` in place (sums add, maxima take the larger)."""
    for name, value in row.items():
        if not value:
            continue
        if name in _SUMMED:
            total[name] += int(value)
        elif name in _MAXED:
            total[name] = max(total[name], int(value))


def aggregates(*, histograms: bool = True) -> dict[str, Any]:
    """SUM (and MAX) of every measure; without the 36 histogram columns when not needed."""
    summed = SUM_FIELDS if histograms else TOTALS
    # PostgreSQL sums bigints as numeric; a bigint result skips Decimal parsing.
    return {
        **{name: Cast(Sum(name), BigIntegerField()) for name in summed},
        **{name: Max(name) for name in MAX_FIELDS},
    }


def errors_of(measures: Measures) -> int:
    """Errors: failed plus abandoned (accounts D4)."""
    return measures["failed"] + measures["abandoned"]


def latency_of(measures: Measures) -> dict[str, float | None]:
    """TTFB and ASR p50/p95 and averages of some measures, in milliseconds."""
    ttfb = [measures[name] for name in TTFB_FIELDS]
    asr = [measures[name] for name in ASR_LATENCY_FIELDS]
    return {
        "ttfb_p50": percentile(ttfb, 0.5, maximum=measures["ttfb_ms_max"]),
        "ttfb_p95": percentile(ttfb, 0.95, maximum=measures["ttfb_ms_max"]),
        "asr_p50": percentile(asr, 0.5, maximum=measures["asr_latency_ms_max"]),
        "asr_p95": percentile(asr, 0.95, maximum=measures["asr_latency_ms_max"]),
        "ttfb_avg": measures["ttfb_ms_sum"] / measures["ttfb_count"]
        if measures["ttfb_count"]
        else None,
        "asr_avg": measures["asr_latency_ms_sum"] / measures["asr_items"]
        if measures["asr_items"]
        else None,
    }
