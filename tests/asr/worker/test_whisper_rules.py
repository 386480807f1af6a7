"""Whisper's decoding rules as applied inside vLLM (asr.worker.engines.whisper_rules), on one row."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.vllm

EOT, NOTS, TB, VOCAB = 50, 60, 61, 100  # a small vocabulary: text < EOT < specials < TB


def rules(timestamps: bool, sample_begin: int = 1) -> dict[str, object]:
    return {
        "eot": EOT,
        "timestamp_begin": TB,
        "suppress": [3, 55],
        "begin_suppress": [5, EOT],
        "timestamps": timestamps,
        "sample_begin": sample_begin,
    }


def apply(timestamps: bool, prompt: list[int], output: list[int], text_logit=1.0):
    import torch

    from asr.worker.engines.whisper_rules import apply_rules

    logits = torch.full((VOCAB,), text_logit)
    logits[TB:] = 0.0
    return apply_rules(
        rules(timestamps),  # type: ignore[arg-type]
        prompt,
        output,
        logits,
        torch.tensor([3, 55]),
    )


def allowed(logits) -> set[int]:
    return {i for i, v in enumerate(logits.tolist()) if v != -math.inf}


def test_suppressed_tokens_and_a_blank_start_are_masked() -> None:
    first = allowed(apply(False, [99, NOTS], []))
    assert not {3, 55, 5, EOT} & first and 7 in first
    later = allowed(apply(False, [99, NOTS], [7]))
    assert {5, EOT} <= later and 3 not in later


def test_without_timestamps_no_time_token_is_sampled() -> None:
    assert not allowed(apply(False, [99, NOTS], [7])) & set(range(TB, VOCAB))


def test_timestamp_rules_pair_times_and_never_go_back() -> None:
    sot_ts0 = [99, TB]
    assert allowed(apply(True, sot_ts0, [])) <= set(range(EOT))  # text after <|0.00|>
    assert not allowed(apply(False, [99, NOTS], [7])) & set(range(EOT + 1, TB))
    closing = allowed(apply(True, sot_ts0, [7, TB + 10], text_logit=5.0))
    assert closing == {EOT, *range(TB + 10, VOCAB)}  # next start or the end, not text
    opened = allowed(apply(True, sot_ts0, [7, TB + 10, TB + 10], text_logit=5.0))
    assert opened <= set(range(EOT + 1))  # text (or the end): no empty segment
    inside = allowed(apply(True, sot_ts0, [7, TB + 10, TB + 10, 8], text_logit=5.0))
    assert TB + 10 not in inside and TB + 11 in inside and 9 in inside


def test_a_likely_time_wins_over_every_text_token() -> None:
    out = allowed(apply(True, [99, TB], [7, 8], text_logit=0.0))
    assert out == set(range(TB + 1, VOCAB))  # summed, the times outweigh any one word
