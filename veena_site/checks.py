"""System checks for configuration invariants."""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.core.checks import Error, register
from django.core.checks import Warning as CheckWarning

from veena_site.conf.registry import OVERRIDES, SETTINGS


@register()
def engines_are_known(**kwargs: Any) -> list[Error]:
    """TTS_ENGINE and ASR_ENGINE must name registered engines."""
    from asr.worker.engines import ENGINES as ASR_ENGINES
    from tts.worker.engines import ENGINES as TTS_ENGINES

    errors = []
    if settings.TTS_ENGINE not in TTS_ENGINES:
        errors.append(
            Error(f"TTS_ENGINE must be one of {sorted(TTS_ENGINES)}", id="veena.E001")
        )
    if settings.ASR_ENGINE not in ASR_ENGINES:
        errors.append(
            Error(f"ASR_ENGINE must be one of {sorted(ASR_ENGINES)}", id="veena.E002")
        )
    return errors


@register()
def websocket_limit_fits_realtime(**kwargs: Any) -> list[Error]:
    """Daphne must accept the realtime socket's 16 MiB messages (realtime AR-4)."""
    if settings.WEBSOCKET_MAX_MESSAGE_BYTES < settings.ASR_MAX_MESSAGE_BYTES:
        return [
            Error(
                "WEBSOCKET_MAX_MESSAGE_BYTES < ASR_MAX_MESSAGE_BYTES", id="veena.E003"
            )
        ]
    return []


@register()
def placement_is_known(**kwargs: Any) -> list[Error]:
    """WORKER_PLACEMENT names a placement (gateway.link.placement)."""
    if settings.WORKER_PLACEMENT not in ("least_loaded", "shared"):
        return [
            Error("WORKER_PLACEMENT must be least_loaded or shared", id="veena.E004")
        ]
    return []


@register()
def constants_are_not_in_the_environment(**kwargs: Any) -> list[CheckWarning]:
    """A variable named like a constant is ignored (docs/settings.md): say so."""
    warnings = []
    ignored = sorted(
        s.name for s in SETTINGS.of_kind("constant") if s.name in os.environ
    )
    if ignored:
        warnings.append(
            CheckWarning(
                f"ignored: {', '.join(ignored)} (constants, not environment variables;"
                " docs/settings.md)",
                id="veena.W001",
            )
        )
    if OVERRIDES in os.environ and settings.SETTINGS_MODULE == "veena_site.settings":
        warnings.append(
            CheckWarning(
                f"ignored: {OVERRIDES} (only tests.settings and bench.support.settings apply it)",
                id="veena.W002",
            )
        )
    return warnings


def operators_can_read_metrics(**kwargs: Any) -> list[CheckWarning]:
    """With PRODUCTION, /metrics answers only OPS_TOKEN: without one nobody can scrape it."""
    if settings.PRODUCTION and not settings.OPS_TOKEN:
        return [
            CheckWarning(
                "PRODUCTION without OPS_TOKEN: /metrics and the detail of /readyz "
                "answer nobody (docs/deploy.md, production checklist)",
                id="veena.W003",
            )
        ]
    return []
