"""Run the worker consumer inside the current process (embedded default, and tests).

Channels' ``runworker`` needs a layer shared between processes (F14); with the in-memory layer the
worker must live in the gateway's own event loop, reading the same layer object.
"""

from __future__ import annotations

import asyncio
import logging

from channels.layers import get_channel_layer
from channels.worker import Worker

from veena_site.contracts import WORKER_CHANNELS, Kind
from veena_site.routing import channel_router
from veena_site.runtime import get_runtime

logger = logging.getLogger(__name__)


def worker_channels(kinds: list[Kind]) -> list[str]:
    """The shared channel names for the kinds this worker serves."""
    return [WORKER_CHANNELS[k] for k in kinds]


def start_embedded_worker() -> asyncio.Task[None]:
    """Start the runtime (engine loading, liveness) and the channel listener in this loop."""
    runtime = get_runtime()
    runtime.start()
    worker = Worker(
        application=channel_router,
        channels=worker_channels(runtime.kinds),
        channel_layer=get_channel_layer(),
    )
    logger.info(
        "embedded worker %s serving %s", runtime.worker_id, ",".join(runtime.kinds)
    )
    return asyncio.get_event_loop().create_task(worker.arun())
