"""The worker's channel listeners, riding out an outage of the channel layer.

Channels' ``Worker`` ends when a receive raises, and a consumer instance whose own-channel
receive raises dies with its channel name. A Redis restart did both: the ``gpuworker`` lost
its listeners and exited (and ``serve`` stopped the whole deployment). Here a failed receive
is retried with backoff, on the same channel, until the layer answers again; running jobs keep
their pinned channel, and jobs whose gateway went away meanwhile end by the keepalive rule
(``gateway.worker.jobs``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.layers import BaseChannelLayer
from channels.worker import Worker

from gateway.outages import cancel_pending, log_failure

logger = logging.getLogger(__name__)

RETRY_FIRST_S = 0.05
# Sessions must work again within 2 s of Redis answering (issue 31): a listener asks at
# least this often, and an unreachable server refuses each try in microseconds.
RETRY_MAX_S = 0.25


async def receive_through_outages(
    layer: BaseChannelLayer, channel: str
) -> dict[str, Any]:
    """``layer.receive(channel)``, retried with backoff while the layer fails."""
    delay, failing = RETRY_FIRST_S, False
    while True:
        try:
            message: dict[str, Any] = await layer.receive(channel)
        except asyncio.CancelledError:
            raise
        except Exception:  # boundary: the layer's connection, retried until it is back
            if cancel_pending():
                raise  # a cancellation the layer turned into another error
            if not failing:
                log_failure(logger, "channel %s unreachable; retrying", channel)
            failing = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)
            continue
        if failing:
            logger.info("channel %s reachable again", channel)
        return message


class ResilientWorker(Worker):
    """``channels.worker.Worker`` whose listeners survive a channel-layer outage.

    ``aliases`` maps extra channels to the channel whose application instance takes their
    messages: a worker's own submission channel (``tts-worker.<id>``, where placement sends
    jobs) feeds the same consumer as the shared ``tts-worker``.
    """

    def __init__(
        self,
        application: Any,
        channels: list[str],
        channel_layer: BaseChannelLayer,
        *,
        aliases: dict[str, str] | None = None,
    ) -> None:
        self.aliases = dict(aliases or {})
        super().__init__(application, [*channels, *self.aliases], channel_layer)

    async def listener(self, channel: str) -> None:
        """Listen on one channel and feed its application instance, forever."""
        target = self.aliases.get(channel, channel)
        while True:
            message = await receive_through_outages(self.channel_layer, channel)
            if not message.get("type"):
                logger.warning("message without a type on %s dropped", channel)
                continue
            scope = {"type": "channel", "channel": target}
            queue = self.get_or_create_application_instance(target, scope)
            await queue.put(message)
