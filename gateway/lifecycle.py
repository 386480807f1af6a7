"""Gateway shutdown: stop taking streams, let live ones drain, then stop the server.

Every API consumer registers its channel here while its socket is open. On SIGTERM/SIGINT
the gateway marks itself shutting down (new sockets are refused with 1001), posts
``gateway.shutdown`` to each live consumer's own channel (so the change goes through its
dispatch loop, tts Q5) and waits until they are gone or the drain time has passed.
"""

from __future__ import annotations

import asyncio
import logging
import time

from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

SHUTDOWN = "gateway.shutdown"
_live: set[str] = set()
_state = {"shutting_down": False}


def register(channel_name: str) -> None:
    """A consumer's socket opened."""
    _live.add(channel_name)


def unregister(channel_name: str) -> None:
    """A consumer's socket closed."""
    _live.discard(channel_name)


def shutting_down() -> bool:
    """True once the gateway has begun to stop."""
    return _state["shutting_down"]


def live_streams() -> int:
    """Open API sockets of this process."""
    return len(_live)


async def drain(timeout_s: float) -> int:
    """Tell every live consumer to wind down; wait ≤ ``timeout_s``; return what is left."""
    _state["shutting_down"] = True
    layer = get_channel_layer()
    for channel in list(_live):
        try:
            await layer.send(channel, {"type": SHUTDOWN})
        except Exception:  # boundary: one consumer's channel; the drain goes on
            logger.warning("shutdown notice not delivered to a stream", exc_info=True)
    deadline = time.monotonic() + timeout_s
    while _live and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    logger.info("gateway drained; %d stream(s) left", len(_live))
    return len(_live)


def reset() -> None:
    """Forget all state (tests)."""
    _live.clear()
    _state["shutting_down"] = False
