"""``python manage.py serve``: the one start command behind ``make serve``.

Without ``REDIS_URL``: one process (Daphne gateway + embedded worker, SQLite, in-memory layer).
With ``REDIS_URL``: supervises the distributed topology as child processes — a Daphne gateway,
``SERVE_WORKERS`` worker processes, a Celery worker and Celery beat — restarting a child that exits,
with backoff (``veena_site.supervisor``); one that cannot start at all stops the command. SIGINT or
SIGTERM stops every child cleanly. ``SERVE_ROLES`` picks the roles on this machine, so more gateways
or workers can be added on other machines sharing the same Redis and database.

Migrations run first. On PostgreSQL they hold an advisory lock, so machines that start together
(gateways and workers of one deployment) take turns instead of racing to create the same tables.
"""

from __future__ import annotations

import logging
import sys
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from gateway.server.lifecycle import stop_seconds
from veena_site.endpoints import checked_listen
from veena_site.management.commands.rungateway import claim
from veena_site.preflight import check_engines
from veena_site.supervisor import Supervisor

logger = logging.getLogger(__name__)

ROLES = ("gateway", "worker", "celery", "beat")
MIGRATE_LOCK = 0x7665656E61  # pg_advisory_lock key: b"veena"
STOP_MARGIN_S = 3.0


def check_redis(url: str) -> None:
    """Fail at once, with a clear message, when ``REDIS_URL`` does not answer."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    try:
        client.ping()
    except redis.RedisError as exc:
        where = urlsplit(url)
        raise CommandError(
            f"REDIS_URL ({where.hostname}:{where.port or 6379}) does not answer: "
            f"{type(exc).__name__}"
        ) from None
    finally:
        client.close()


def migrate() -> None:
    """Apply migrations; on PostgreSQL one process at a time (advisory lock)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        call_command("migrate", interactive=False)
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [MIGRATE_LOCK])
        call_command("migrate", interactive=False)
    finally:
        connection.close()  # ends the session, and with it the lock


# Celery's command line, ending quietly when a second SIGTERM comes (veena_site.celery_run)
CELERY = "veena_site.celery_run"


def role_commands(
    roles: list[str], host: str, port: int, workers: int
) -> list[list[str]]:
    """The child command lines for ``roles``."""
    py, manage = sys.executable, str(settings.BASE_DIR / "manage.py")
    table = {
        "gateway": [[py, manage, "rungateway", "--host", host, "--port", str(port)]],
        "worker": [[py, manage, "gpuworker"] for _ in range(workers)],
        # Gossip and mingle talk between Celery workers, which these tasks never need; their
        # reconnect after a broker restart logged errors.
        "celery": [
            [py, "-m", CELERY, "-A", "veena_site", "worker", "-l", "INFO", "-c", "1"]
            + ["--without-gossip", "--without-mingle"]
        ],
        "beat": [
            [
                py,
                "-m",
                CELERY,
                "-A",
                "veena_site",
                "beat",
                "-l",
                "INFO",
                "-s",
                str(settings.DATA_DIR / "celerybeat-schedule"),
            ]
        ],
    }
    return [cmd for role in roles for cmd in table[role]]


class Command(BaseCommand):
    """Start the service in the topology the environment asks for."""

    help = "Start the service: embedded without REDIS_URL, distributed with it."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=settings.HOST)
        parser.add_argument("--port", type=int, default=settings.PORT)

    def execute(self, *args: Any, **options: Any) -> Any:
        """Claim the embedded data directory first: a refusal is one line, before checks."""
        if not settings.REDIS_URL:
            claim(settings.DATA_DIR)
        return super().execute(*args, **options)

    def handle(self, *args: Any, host: str, port: int, **options: Any) -> None:
        roles = [r for r in settings.SERVE_ROLES if r]
        unknown = set(roles) - set(ROLES)
        if unknown:
            raise CommandError(
                f"unknown SERVE_ROLES {sorted(unknown)}; use {','.join(ROLES)}"
            )
        if not settings.REDIS_URL or "worker" in roles:  # engines load on this machine
            check_engines(settings.WORKER_KINDS)
        if settings.REDIS_URL:
            check_redis(settings.REDIS_URL)
        migrate()
        if not settings.REDIS_URL:
            logger.info("embedded topology: one process on %s:%d", host, port)
            call_command("rungateway", host=host, port=port)
            return
        if "gateway" in roles:
            checked_listen(host, port)  # bad TLS files fail before any child starts
        sys.exit(
            self.supervise(role_commands(roles, host, port, settings.SERVE_WORKERS))
        )

    def supervise(self, commands: list[list[str]]) -> int:
        """Run every child until a signal, restarting those that exit; stop all."""
        supervisor = Supervisor(commands)
        supervisor.stop_on_signals()
        status = supervisor.run()
        # Gateways drain their streams, workers their jobs, for TTS_DRAIN_S and a margin
        # before they exit (tts W12, gateway.server.lifecycle).
        supervisor.stop(stop_seconds() + STOP_MARGIN_S)
        return status
