"""Gateway shutdown: stop taking streams, let live ones drain, then stop the server.

Every API consumer registers its channel here while its socket is open. On SIGTERM/SIGINT
the gateway marks itself shutting down, posts ``gateway.shutdown`` to each live consumer's
own channel (so the change goes through its dispatch loop, tts Q5) and waits until they are
gone or the drain time has passed. Meanwhile new sockets are refused with the protocol's
service-unavailable error and 1013, and new HTTP requests with 503 (``DrainMiddleware``;
``/healthz`` still answers): the client retries elsewhere (issue 31).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from gateway.server.middleware import Middleware

logger = logging.getLogger(__name__)

SHUTDOWN = "gateway.shutdown"
CLOSE_MARGIN_S = 2.0
STOP_GRACE_S = 10.0
_live: set[str] = set()
_state = {"shutting_down": False}
_http = {"in_flight": 0}  # HTTP requests whose response has not ended (``tracked``)


def register(channel_name: str) -> None:
    """A consumer's socket opened."""
    _live.add(channel_name)


def unregister(channel_name: str) -> None:
    """A consumer's socket closed."""
    _live.discard(channel_name)


def drain_seconds() -> float:
    """The longest drain: the TTS drain (tts W12) plus a margin for the closes. A gateway
    waits this long for its streams, a worker as long for its jobs."""
    return float(settings.TTS_DRAIN_S) + CLOSE_MARGIN_S


def stop_seconds() -> float:
    """The longest a stopping gateway or worker takes to exit: the drain, then what is left
    of a worker's shutdown (jobs told, liveness withdrawn)."""
    return drain_seconds() + STOP_GRACE_S


def shutting_down() -> bool:
    """True once the gateway has begun to stop."""
    return _state["shutting_down"]


def live_streams() -> int:
    """Open API sockets of this process."""
    return len(_live)


def tracked(app: Any) -> Any:
    """The HTTP application, counted while each request runs, streamed body included, so
    that a drain waits for a REST response on its way as for a socket."""

    async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            return await app(scope, receive, send)  # type: ignore[no-any-return]
        _http["in_flight"] += 1
        try:
            await app(scope, receive, send)
        finally:
            _http["in_flight"] -= 1

    return counted


def _busy() -> bool:
    return bool(_live) or _http["in_flight"] > 0


async def drain(timeout_s: float) -> int:
    """Tell every live consumer to wind down; wait ≤ ``timeout_s`` for them and for the
    HTTP requests in flight; return how many are left."""
    _state["shutting_down"] = True
    layer = get_channel_layer()
    for channel in list(_live):
        try:
            await layer.send(channel, {"type": SHUTDOWN})
        except Exception:  # boundary: one consumer's channel; the drain goes on
            logger.warning("shutdown notice not delivered to a stream", exc_info=True)
    deadline = time.monotonic() + timeout_s
    while _busy() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    left = len(_live) + _http["in_flight"]
    logger.info("gateway drained; %d stream(s) and request(s) left", left)
    return left


SHUTTING_DOWN = "The server is shutting down. Retry shortly."
ANSWERED_WHILE_DRAINING = ("/healthz",)


def unavailable_response() -> JsonResponse:
    """503 in OpenAI's error envelope with a retry hint: the gateway is draining."""
    body = {
        "error": {
            "message": SHUTTING_DOWN,
            "type": "server_error",
            "param": None,
            "code": "service_unavailable",
        }
    }
    response = JsonResponse(body, status=503)
    response["Retry-After"] = "1"
    return response


class DrainMiddleware(Middleware):
    """While the gateway drains, a new HTTP request gets 503 (the load balancer's
    ``/readyz`` too); requests already running finish."""

    def before(self, request: HttpRequest) -> HttpResponse | None:
        return unavailable_response() if refused(request) else None


def refused(request: HttpRequest) -> bool:
    """A request that arrives while the gateway drains (health checks excepted)."""
    return shutting_down() and request.path not in ANSWERED_WHILE_DRAINING


def reset() -> None:
    """Forget all state (tests)."""
    _live.clear()
    _state["shutting_down"] = False
    _http["in_flight"] = 0
