"""Fixed latency histograms: mergeable by addition, so rollups carry percentiles.

Every UsageRollup row holds one count per bin for TTS time-to-first-byte and one for ASR
commit→completed latency. Bins are the same everywhere, so merging rows is a column-wise
``SUM`` in the database and percentiles never need raw records. A percentile is read by
linear interpolation inside the bin that holds its rank, the way Prometheus'
``histogram_quantile`` does; the error is bounded by the bin's width.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence

# Upper bounds (exclusive) in milliseconds; one more bin holds everything above the last.
LATENCY_BOUNDS_MS: tuple[int, ...] = (
    10,
    20,
    30,
    50,
    75,
    100,
    150,
    200,
    300,
    500,
    750,
    1_000,
    1_500,
    2_000,
    3_000,
    5_000,
    10_000,
)
BIN_COUNT = len(LATENCY_BOUNDS_MS) + 1


def field_names(prefix: str) -> tuple[str, ...]:
    """The model fields of one histogram: ``<prefix>_00`` … ``<prefix>_17``."""
    return tuple(f"{prefix}_{index:02d}" for index in range(BIN_COUNT))


TTFB_FIELDS = field_names("ttfb_hist")
ASR_LATENCY_FIELDS = field_names("asr_latency_hist")


def bin_index(ms: float) -> int:
    """The bin that holds a latency of ``ms`` milliseconds."""
    return bisect_right(LATENCY_BOUNDS_MS, max(0.0, ms))


def bin_range(index: int) -> tuple[int, int | None]:
    """``(lower, upper)`` of a bin in milliseconds; the last bin has no upper bound."""
    lower = 0 if index == 0 else LATENCY_BOUNDS_MS[index - 1]
    upper = LATENCY_BOUNDS_MS[index] if index < len(LATENCY_BOUNDS_MS) else None
    return lower, upper


def empty() -> list[int]:
    """A histogram with no observations."""
    return [0] * BIN_COUNT


def observe(counts: list[int], ms: float) -> None:
    """Count one observation of ``ms`` milliseconds in place."""
    counts[bin_index(ms)] += 1


def merge(histograms: Iterable[Sequence[int]]) -> list[int]:
    """The bin-wise sum of ``histograms``."""
    total = empty()
    for counts in histograms:
        for index, count in enumerate(counts):
            total[index] += count
    return total


def normalized(counts: object) -> list[int]:
    """A stored histogram as exactly ``BIN_COUNT`` non-negative ints (bad input: empty)."""
    if not isinstance(counts, list | tuple) or len(counts) != BIN_COUNT:
        return empty()
    if not all(isinstance(c, int) and c >= 0 for c in counts):
        return empty()
    return list(counts)


def percentile(
    counts: Sequence[int], q: float, *, maximum: float | None = None
) -> float | None:
    """The ``q`` quantile (0 < q ≤ 1) in milliseconds, or None with no observations.

    Inside its bin the value is interpolated linearly; the open last bin ends at
    ``maximum`` when known (the rollups keep the largest value), else at its lower bound.
    """
    assert 0 < q <= 1, q
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for index, count in enumerate(counts):
        if count and seen + count >= rank:
            lower, upper = bin_range(index)
            if upper is None:
                upper = int(maximum) if maximum and maximum > lower else lower
            if maximum is not None:
                upper = min(upper, max(int(maximum), lower))
            return lower + (upper - lower) * (rank - seen) / count
        seen += count
    raise AssertionError("unreachable: the rank lies within the total")
