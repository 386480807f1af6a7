"""Latency histograms: bins, merging and percentiles (pure)."""

from __future__ import annotations

import random

from accounts import histogram as h


def test_bins_cover_every_latency_once() -> None:
    assert h.bin_index(0) == 0 and h.bin_index(9.9) == 0 and h.bin_index(10) == 1
    assert (
        h.bin_index(10_000) == h.BIN_COUNT - 1 and h.bin_index(10**9) == h.BIN_COUNT - 1
    )
    assert len(h.TTFB_FIELDS) == len(h.ASR_LATENCY_FIELDS) == h.BIN_COUNT


def test_merging_is_bin_wise_addition_so_percentiles_of_parts_combine() -> None:
    rng = random.Random(3)
    values = [rng.lognormvariate(5.5, 0.6) for _ in range(5000)]
    parts = [h.empty() for _ in range(7)]
    for i, v in enumerate(values):
        h.observe(parts[i % 7], v)
    merged = h.merge(parts)
    whole = h.empty()
    for v in values:
        h.observe(whole, v)
    assert merged == whole
    exact = sorted(values)
    for q in (0.5, 0.95):
        estimate = h.percentile(merged, q, maximum=max(values))
        true = exact[int(q * len(exact)) - 1]
        lower, upper = h.bin_range(h.bin_index(true))
        assert estimate is not None
        # Within the bin that holds the true value (the histogram's resolution).
        assert lower <= estimate <= (upper or max(values)) + 1e-9


def test_percentile_of_nothing_is_none_and_the_open_bin_ends_at_the_maximum() -> None:
    assert h.percentile(h.empty(), 0.5) is None
    counts = h.empty()
    h.observe(counts, 25_000)
    assert h.percentile(counts, 0.95, maximum=25_000) <= 25_000
    assert h.percentile(counts, 0.5, maximum=25_000) >= 10_000


def test_stored_histograms_are_checked() -> None:
    assert h.normalized([1] * h.BIN_COUNT) == [1] * h.BIN_COUNT
    assert h.normalized([1, 2]) == h.empty()
    assert h.normalized("x") == h.empty()
    assert h.normalized([-1] * h.BIN_COUNT) == h.empty()
