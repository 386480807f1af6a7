"""A channel-layer receive with a time limit that never cancels the receive itself.

channels-redis delivers every process-specific channel of a process through one ``BZPOPMIN``,
run by whichever ``receive()`` holds the process's receive lock at the time. Cancelling that
receive while its ``BZPOPMIN`` reply is on its way loses the message it popped, and that
message may belong to another consumer of the process: under load, TTS streams lost a chunk
("chunk gap") whenever a link's ``abandon()`` timed out its receive with ``wait_for``. So at
the time limit ``receive_until`` sends a wake-up message to the channel it is reading and lets
the receive end by itself; it cancels only when even that does not end it within
``WAKE_PATIENCE_S`` (the layer is down, and nothing can be lost).
"""

from __future__ import annotations

import asyncio
from typing import Any

from channels.layers import BaseChannelLayer

WAKE = "layer.wake"
WAKE_PATIENCE_S = 5.0


async def receive_until(
    layer: BaseChannelLayer, channel: str, timeout_s: float
) -> dict[str, Any] | None:
    """The next message on ``channel``, or None when none came within ``timeout_s``.

    Raises what the layer raises. A wake-up left unread in the channel expires with it.
    """
    task = asyncio.ensure_future(layer.receive(channel))
    try:
        done, _ = await asyncio.wait({task}, timeout=max(0.0, timeout_s))
        if not done:
            try:
                await layer.send(channel, {"type": WAKE})
            except Exception:  # boundary: the layer is down; the cancel below is safe
                pass
            done, _ = await asyncio.wait({task}, timeout=WAKE_PATIENCE_S)
        if not done:
            return None
        message: dict[str, Any] = task.result()
        return None if message.get("type") == WAKE else message
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
