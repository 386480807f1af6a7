"""How many threads the engines may use: one fact, read by every CPU engine."""

from __future__ import annotations

import os

from django.conf import settings


def engine_threads() -> int:
    """Return ENGINE_THREADS when Django settings are configured, else the CPU count."""
    if settings.configured:
        return int(settings.ENGINE_THREADS)
    return os.cpu_count() or 1
