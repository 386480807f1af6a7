"""The ``TTS_VLLM_*`` / ``TTS_SNAC_*`` settings of the vLLM TTS engine, read once (pure).

Both sides use it: the gateway describes the engine from it (voices, model version, tts §13.2)
without loading anything, and the worker's loader builds the engine from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tts.orpheus.vllm_prompts import RECIPES, Recipe

WIRE_NAME = "vllm-snac"  # the engine as clients see it (tts §0)
SEGMENT_PAUSE_MS = 80  # AU9 default for vllm-snac
DEFAULT_SPEAKER = "male1"


@dataclass(frozen=True)
class VllmTtsConfig:
    """Everything the engine needs from settings."""

    model: Path
    snac: Path
    recipe: Recipe
    voices: tuple[str, ...]
    data_dir: Path
    dtype: str = "auto"
    max_num_seqs: int = 4
    max_model_len: int = 4096
    kv_cache_gib: int = 4
    enforce_eager: bool | None = None  # None: eager without CUDA, CUDA graphs with it
    force_slot_order: bool = False
    cpu_threads_bind: str = "auto"
    snac_random_init: bool = False
    snac_device: str = "auto"
    snac_noise: bool = True
    snac_max_batch: int = 64
    snac_batch_timeout_ms: float = 2.0
    snac_max_step: int = 0  # 0: 1 on CUDA, 8 on CPU
    snac_threads: int = 1

    @classmethod
    def from_settings(cls, settings: Any) -> VllmTtsConfig:
        """Read the Django settings (``settings`` is ``django.conf.settings``)."""
        recipe = RECIPES[settings.TTS_VLLM_RECIPE]
        return cls(
            model=Path(settings.TTS_VLLM_MODEL),
            snac=Path(settings.TTS_SNAC_MODEL),
            recipe=recipe,
            voices=tuple(v.lower() for v in settings.TTS_VLLM_VOICES) or recipe.voices,
            data_dir=Path(settings.DATA_DIR),
            dtype=settings.TTS_VLLM_DTYPE,
            max_num_seqs=settings.TTS_VLLM_MAX_NUM_SEQS,
            max_model_len=settings.TTS_VLLM_MAX_MODEL_LEN,
            kv_cache_gib=settings.TTS_VLLM_KV_CACHE_GIB,
            enforce_eager=settings.TTS_VLLM_ENFORCE_EAGER,
            force_slot_order=settings.TTS_VLLM_FORCE_SLOT_ORDER,
            cpu_threads_bind=settings.TTS_VLLM_CPU_THREADS_BIND,
            snac_random_init=settings.TTS_SNAC_RANDOM_INIT,
            snac_device=settings.TTS_SNAC_DEVICE,
            snac_noise=settings.TTS_SNAC_NOISE,
            snac_max_batch=settings.TTS_SNAC_MAX_BATCH,
            snac_batch_timeout_ms=settings.TTS_SNAC_BATCH_TIMEOUT_MS,
            snac_max_step=settings.TTS_SNAC_MAX_STEP,
            snac_threads=settings.TTS_SNAC_THREADS,
        )

    @property
    def model_version(self) -> str:
        """``vllm-snac/<checkpoint directory name>`` (tts E1)."""
        return f"{WIRE_NAME}/{self.model.name or 'unset'}"

    @property
    def default_voice(self) -> str:
        """The voice ``male1`` resolves to (S3), else the first voice."""
        target = self.recipe.aliases.get(DEFAULT_SPEAKER)
        return target if target in self.voices else self.voices[0]

    @property
    def aliases(self) -> dict[str, str]:
        """The recipe's S3 aliases that name a configured voice; ``male1`` always resolves."""
        table = {k: v for k, v in self.recipe.aliases.items() if v in self.voices}
        table.setdefault(DEFAULT_SPEAKER, self.default_voice)
        return table
