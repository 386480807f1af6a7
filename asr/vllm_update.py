"""Validation of vLLM's flat ``session.update`` (docs/specs/realtime-asr.md VL-2): the new
configuration, or ``ConfigError``, without touching the old one (SE-6: atomic)."""

from __future__ import annotations

import dataclasses

from asr.config import LOGPROBS_INCLUDE, ConfigError, Models, SessionConfig
from asr.messages import FINAL
from asr.protocol import VllmSessionUpdate
from asr.updates import check_transcript
from gateway.wording import count


def validate_vllm_update(
    event: VllmSessionUpdate, current: SessionConfig, models: Models
) -> SessionConfig:
    """vLLM's ``session.update{model, language?, prompt?, include?}`` (VL-2)."""
    model = event.model
    if model is None:
        raise ConfigError("invalid_event", "Missing required field: model", "model")
    if not isinstance(model, str):
        raise ConfigError("invalid_event", "Field 'model' must be a string.", "model")
    if not models.allowed(model):
        shown = model if len(model) <= 96 else model[:93] + "..."
        raise ConfigError(
            "model_not_found", f"The model `{shown}` does not exist.", "model"
        )
    include = event.include
    if include is not None and not (
        isinstance(include, list)
        and len(include) <= models.max_include
        and all(v == LOGPROBS_INCLUDE for v in include)
    ):
        raise ConfigError(
            "invalid_event",
            f"Invalid include: only '{LOGPROBS_INCLUDE}' is supported.",
            "include",
        )
    language = event.language
    if language is not None and not models.language_ok(language):
        raise ConfigError("invalid_event", "Invalid language.", "language")
    check_transcript(event.transcript, "invalid_event", "transcript")
    prompt = event.prompt
    if prompt is not None and not isinstance(prompt, str):
        raise ConfigError("invalid_event", "Field 'prompt' must be a string.", "prompt")
    if prompt is not None and not models.prompt_ok(prompt):
        cap = models.max_prompt_chars or 0
        message = f"Field 'prompt' must be at most {count(cap, 'character')}."
        raise ConfigError("invalid_event", message, "prompt")
    return dataclasses.replace(
        current,
        model=model,
        language=language,
        prompt=prompt,
        include=tuple(include) if include is not None else None,
        transcript=event.transcript or FINAL,
    )
