"""A vLLM logits processor that lets a request sample only the audio id of the next slot.

Loaded by vLLM's engine core (``logits_processors=["tts.worker.engines.snac_slots:SlotOrder"]``) and
applied to the requests whose ``SamplingParams.extra_args`` carry ``{"snac_slot_order": True}``:
after ``n`` generated ids the next id is in slot ``n mod 7`` or a stop id, so every frame is
well formed. The tiny random test model needs it to produce decodable streams; for a trained
checkpoint it is an optional constraint (TTS_VLLM_FORCE_SLOT_ORDER).
"""

from __future__ import annotations

from typing import Any

import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

from tts.orpheus.snac_tokens import AUDIO_BASE, CODEBOOK_SIZE, FRAME_TOKENS

EXTRA_ARG = "snac_slot_order"
STOP_IDS_ARG = "snac_stop_ids"


class _NextSlot:
    """Per request: block every id but the next slot's range and the stop ids."""

    def __init__(self, stop_ids: list[int]) -> None:
        self.stop_ids = stop_ids
        self._blocked: torch.Tensor | None = None

    def __call__(self, output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
        blocked = self._masks(logits)
        return logits.masked_fill(blocked[len(output_ids) % FRAME_TOKENS], -torch.inf)

    def _masks(self, logits: torch.Tensor) -> torch.Tensor:
        if self._blocked is None or self._blocked.shape[-1] != logits.shape[-1]:
            blocked = torch.ones(
                (FRAME_TOKENS, logits.shape[-1]), dtype=torch.bool, device=logits.device
            )
            for slot in range(FRAME_TOKENS):
                first = AUDIO_BASE + slot * CODEBOOK_SIZE
                blocked[slot, first : first + CODEBOOK_SIZE] = False
                blocked[slot, self.stop_ids] = False
            self._blocked = blocked
        return self._blocked


class SlotOrder(AdapterLogitsProcessor):
    """Force valid SNAC slot order on the requests that ask for it."""

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        """Accept only a boolean flag and a list of stop ids."""
        extra: dict[str, Any] = sampling_params.extra_args or {}
        if not isinstance(extra.get(EXTRA_ARG, False), bool):
            raise ValueError(f"{EXTRA_ARG} must be a boolean")

    def is_argmax_invariant(self) -> bool:
        """Masking changes the argmax."""
        return False

    def new_req_logits_processor(self, params: SamplingParams) -> _NextSlot | None:
        """A per-request masker, or None when the request did not ask."""
        extra: dict[str, Any] = params.extra_args or {}
        if not extra.get(EXTRA_ARG):
            return None
        return _NextSlot([int(i) for i in extra.get(STOP_IDS_ARG, [])])
