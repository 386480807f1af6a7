"""The server process's startup heap, kept out of the garbage collector's sight.

Everything loaded at startup (Django, the apps, their views, templates' code) lives as long
as the process. Left to the collector, each full collection walks it all: ~170,000 objects,
40-80 ms on a small machine, paid by whichever request happened to trigger it (it was the
slowest of 20 dashboard loads, the p95 the dashboard bench measures). Frozen, a collection
walks only what requests allocate.
"""

from __future__ import annotations

import gc

from django.urls import get_resolver


def freeze_startup_heap() -> None:
    """Load every view module now (not on the first request), then freeze the heap."""
    get_resolver().url_patterns  # noqa: B018 - imports the URL configuration's modules
    gc.collect()  # garbage from startup is freed, not frozen
    gc.freeze()
