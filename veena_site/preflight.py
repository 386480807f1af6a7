"""Start-time checks of the engines a process will load, before any child or engine starts.

``X_ENGINE=vllm`` (``TTS_ENGINE``, ``ASR_ENGINE``) needs the vLLM tier; without it the worker
would only log a load failure and stay not ready, so ``serve``, ``rungateway`` (embedded) and
``gpuworker`` stop at once with one line instead. The gateway alone never loads an engine and is
not checked: a web box may carry the same environment without the tier.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.core.management.base import CommandError

from gateway.worker.vllm_env import EngineLoadError, require_vllm

VLLM_ENGINE = "vllm"  # the X_ENGINE value of every vLLM engine


def engine_setting(kind: str) -> str:
    """The name of the engine setting of ``kind``: ``TTS_ENGINE`` or ``ASR_ENGINE``."""
    return f"{kind.upper()}_ENGINE"


def check_engines(kinds: Iterable[str]) -> None:
    """Raise ``CommandError`` (one line) when an engine of ``kinds`` cannot start here."""
    for kind in kinds:
        setting = engine_setting(kind)
        if getattr(settings, setting) != VLLM_ENGINE:
            continue
        try:
            require_vllm(what=f"{setting}={VLLM_ENGINE}")
        except EngineLoadError as error:
            raise CommandError(str(error)) from None
    if "asr" in kinds:
        from asr.worker.engines import check_engine

        try:
            check_engine(settings.ASR_ENGINE)
        except EngineLoadError as error:
            raise CommandError(str(error)) from None
