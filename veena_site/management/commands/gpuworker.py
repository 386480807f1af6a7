"""``python manage.py gpuworker``: a worker process on the shared channel layer.

It is Channels' worker (``channels.worker.Worker``) on ``tts-worker`` and/or ``asr-worker``, with
listeners that ride out a Redis outage (``gateway.layers.listener``), plus the engine loading, liveness
beacon and graceful shutdown that ``runworker`` lacks. SIGTERM / SIGINT stop accepting, let
running jobs end for up to the gateways' drain (``gateway.server.lifecycle.drain_seconds``), end
the rest with ``worker_shutdown`` and withdraw the worker from liveness.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from gateway.server.lifecycle import drain_seconds, stop_seconds
from veena_site.embedded import start_runtime
from veena_site.preflight import check_engines

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    """Run engines for the gateways that share this Redis."""

    help = (
        "Run a GPU/CPU inference worker on the shared channel layer (needs REDIS_URL)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--kinds",
            default=",".join(settings.WORKER_KINDS),
            help="tts,asr (default: both)",
        )

    def handle(self, *args: Any, kinds: str, **options: Any) -> None:
        if not settings.REDIS_URL:
            raise CommandError(
                "gpuworker needs REDIS_URL (the in-memory layer is per process)"
            )
        settings.WORKER_KINDS = [k for k in kinds.split(",") if k]
        check_engines(settings.WORKER_KINDS)
        status = asyncio.run(self.serve())
        # Everything that matters is released by now (jobs told, slots freed, liveness
        # withdrawn). Channels' listeners and engine threads can keep the interpreter from
        # exiting (seen: a worker still alive 15 s after SIGTERM), so leave at once.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)

    async def serve(self) -> int:
        """Serve until a signal; then drain and stop within ``stop_seconds()``; the exit
        status."""
        runtime, worker = start_runtime()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        listener = asyncio.create_task(worker.arun())
        logger.info("worker %s serving %s", runtime.worker_id, ",".join(runtime.kinds))
        await asyncio.wait(
            [listener, asyncio.create_task(stop.wait())],
            return_when=asyncio.FIRST_COMPLETED,
        )
        status = 0
        if listener.done():  # the layer listener ended without a signal: a failure
            error = None if listener.cancelled() else listener.exception()
            logger.error(
                "worker %s: channel listener ended", runtime.worker_id, exc_info=error
            )
            status = 1
        logger.info("worker %s shutting down", runtime.worker_id)
        try:
            await asyncio.wait_for(
                runtime.shutdown(drain_s=drain_seconds()), stop_seconds()
            )
        except TimeoutError:
            logger.error("worker %s: shutdown exceeded its time", runtime.worker_id)
            status = 1
        listener.cancel()
        await asyncio.wait({listener}, timeout=1.0)
        logger.info("worker %s stopped", runtime.worker_id)
        return status
