"""``python manage.py rungateway``: one Daphne gateway process.

Without ``REDIS_URL`` the worker runs inside this process (embedded default). Daphne's WebSocket
message and frame limits are raised to ``WEBSOCKET_MAX_MESSAGE_BYTES`` (realtime AR-4). With
``TLS_CERT_FILE`` and ``TLS_KEY_FILE`` it serves https/wss itself (``veena_site.endpoints``).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from veena_site.preflight import check_engines

logger = logging.getLogger(__name__)


def claim(data_dir: Path) -> None:
    """The embedded server's data directory, or one clear line and exit 1."""
    from veena_site.embedded import DataDirInUse, claim_data_dir

    try:
        claim_data_dir(data_dir)
    except DataDirInUse as exc:
        raise CommandError(str(exc)) from None


class Command(BaseCommand):
    """Serve HTTP and WebSockets with Daphne."""

    help = "Run one Daphne gateway (with the embedded worker when REDIS_URL is unset)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def execute(self, *args: Any, **options: Any) -> Any:
        """Claim the embedded data directory first: a refusal is one line, before checks."""
        if not settings.REDIS_URL:
            claim(settings.DATA_DIR)
        return super().execute(*args, **options)

    def handle(self, *args: Any, host: str, port: int, **options: Any) -> None:
        if not settings.REDIS_URL:  # the embedded worker loads its engines here
            check_engines(settings.WORKER_KINDS)
        from daphne.server import Server  # installs the asyncio reactor first

        from gateway.server import daphne_compat, http_guard, lifecycle
        from veena_site.asgi import application
        from veena_site.endpoints import checked_listen
        from veena_site.http_limits import body_limit, too_large

        listen = checked_listen(host, port)
        daphne_compat.install()
        http_guard.install(
            header_timeout_s=settings.HTTP_HEADER_TIMEOUT_S,
            body_limit=body_limit,
            too_large=too_large,
        )

        def ready() -> None:
            # Called before the reactor's loop runs: schedule the embedded worker and the
            # in-process beat (accounts' periodic jobs) for the loop's first turn.
            loop = asyncio.get_event_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(
                    sig, lambda: loop.create_task(stop_gracefully())
                )
            if not settings.REDIS_URL:
                from accounts.scheduler import start_embedded_scheduler
                from veena_site.embedded import start_embedded_worker

                loop.call_soon(start_embedded_worker)
                loop.call_soon(start_embedded_scheduler)
            logger.info("gateway listening on %s", listen.url)

        async def stop_gracefully() -> None:
            """Drain live streams (tts W12), stop the embedded worker, stop the reactor."""
            if lifecycle.shutting_down():
                return
            drain_s = lifecycle.drain_seconds()
            logger.info("gateway stopping: draining streams for up to %gs", drain_s)
            await lifecycle.drain(drain_s)
            from accounts.refusals import flush_refusals

            await flush_refusals()  # the refusals this process counted but not folded
            if not settings.REDIS_URL:
                from veena_site.runtime import get_runtime

                await get_runtime().shutdown()
            from twisted.internet import reactor

            reactor.stop()  # type: ignore[misc]

        server = Server(
            application=application,
            endpoints=listen.endpoints,
            signal_handlers=False,  # ours: drain first (stop_gracefully)
            websocket_max_message_size=settings.WEBSOCKET_MAX_MESSAGE_BYTES,
            websocket_max_frame_size=settings.WEBSOCKET_MAX_MESSAGE_BYTES,
            application_close_timeout=10,
            ready_callable=ready,
            verbosity=0,
        )
        server.run()
