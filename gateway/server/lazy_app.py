"""WebSocket routes whose consumers are imported when first needed (issue 13: memory).

A gateway imports the consumers of the kinds it serves (``GATEWAY_KINDS``) at start; another
kind's consumer is imported by its first connection, so a TTS-only gateway does not hold the
realtime protocol's event models (the OpenAI SDK's types, ~48 MiB of RSS) unless a client asks
for ``/v1/realtime``. Either way every route answers as before.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from django.urls import URLPattern, path

# A WebSocket route: (path, "module:Consumer")
Route = tuple[str, str]


class LazyApp:
    """The ASGI application of the consumer class ``target`` ("module:Class"), imported on the
    first scope that reaches it (in a thread, so the event loop serves others meanwhile) or by
    ``load()``."""

    def __init__(self, target: str) -> None:
        module, _, name = target.partition(":")
        if not module or not name:
            raise ValueError(f"expected 'module:Class', got {target!r}")
        self._module, self._name = module, name
        self._app: Any = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._app is not None

    def load(self) -> Any:
        """Import the consumer and build its application once; return it."""
        with self._lock:
            if self._app is None:
                consumer = getattr(importlib.import_module(self._module), self._name)
                self._app = consumer.as_asgi()
            return self._app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        app = self._app or await asyncio.to_thread(self.load)
        await app(scope, receive, send)


def websocket_routes(
    routes: Mapping[str, Route], served: Iterable[str]
) -> list[URLPattern]:
    """One URL pattern per kind of ``routes``; the ``served`` kinds' consumers loaded now."""
    served = set(served)
    patterns = []
    for kind, (route, target) in routes.items():
        app = LazyApp(target)
        if kind in served:
            app.load()
        patterns.append(path(route, app))  # type: ignore[arg-type]  # an ASGI app (Channels)
    return patterns
