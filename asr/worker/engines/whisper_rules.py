"""Whisper's decoding rules as a vLLM logits processor, run inside the vLLM engine process.

vLLM samples Whisper like any decoder, so without these rules greedy decoding may emit special
tokens mid-text, start with a blank, and in timestamp mode rarely closes a segment (a 27 s window
came back as one segment). The rules are those of openai/whisper ``decoding.py``
(``SuppressTokens``, ``SuppressBlank``, ``ApplyTimestampRules``), applied per request from
``SamplingParams.extra_args["whisper"]`` (a ``WhisperRules`` as a dict).

vLLM loads this module by name in its engine core process, so it imports only torch and vLLM.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypedDict

import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

ARGS_KEY = "whisper"
NEG_INF = -math.inf


class WhisperRules(TypedDict):
    """One request's token ids for the rules."""

    eot: int
    timestamp_begin: int
    suppress: list[int]
    begin_suppress: list[int]
    timestamps: bool
    # Prompt tokens from this index on count as sampled: the forced <|0.00|> and prefix.
    sample_begin: int


def apply_rules(
    rules: WhisperRules,
    prompt: list[int],
    output: list[int],
    logits: torch.Tensor,
    suppress: torch.Tensor,
) -> torch.Tensor:
    """The rules on one request's logits row (modified in place)."""
    tb, eot = rules["timestamp_begin"], rules["eot"]
    logits.index_fill_(0, suppress, NEG_INF)
    logits[eot + 1 : tb] = (
        NEG_INF  # special tokens (start, language, task) never follow
    )
    if not output and len(prompt) == rules["sample_begin"] + 1:
        logits[rules["begin_suppress"]] = NEG_INF  # no blank or EOT first
    if not rules["timestamps"]:
        logits[tb:] = NEG_INF
        return logits
    seq = prompt[rules["sample_begin"] :] + output
    last = len(seq) >= 1 and seq[-1] >= tb
    penultimate = len(seq) < 2 or seq[-2] >= tb
    if last:
        if penultimate:  # a segment cannot be empty
            logits[tb:] = NEG_INF
        else:  # after a closing timestamp: the next segment's start, or the end
            logits[:eot] = NEG_INF
    stamps = [t for t in seq if t >= tb]
    if stamps:  # times never decrease, and a segment has a length
        floor = stamps[-1] if last and not penultimate else stamps[-1] + 1
        logits[tb:floor] = NEG_INF
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    if logprobs[tb:].logsumexp(dim=-1) > logprobs[:tb].max():
        logits[:tb] = NEG_INF  # time is likelier than any text token: take a timestamp
    return logits


class WhisperRulesProcessor(AdapterLogitsProcessor):
    """Applies ``apply_rules`` to requests that carry ``extra_args["whisper"]``."""

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        """Requests without rules pass; rules must name every field."""
        rules = (sampling_params.extra_args or {}).get(ARGS_KEY)
        if rules is not None and set(rules) != set(WhisperRules.__annotations__):
            raise ValueError("extra_args['whisper'] must be a complete WhisperRules")

    def is_argmax_invariant(self) -> bool:
        """The rules change which token is most likely."""
        return False

    def new_req_logits_processor(
        self, params: SamplingParams
    ) -> Callable[[list[int], list[int], torch.Tensor], torch.Tensor] | None:
        """A per-request closure over the request's rules, or None without rules."""
        rules: Any = (params.extra_args or {}).get(ARGS_KEY)
        if rules is None:
            return None
        suppress = torch.tensor(rules["suppress"], dtype=torch.long)

        def process(
            prompt: list[int], output: list[int], logits: torch.Tensor
        ) -> torch.Tensor:
            return apply_rules(
                rules, prompt, output, logits, suppress.to(logits.device)
            )

        return process
