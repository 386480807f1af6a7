"""``python manage.py serve``: the one start command behind ``make serve``.

Without ``REDIS_URL``: one process (Daphne gateway + embedded worker, SQLite, in-memory layer).
With ``REDIS_URL``: supervises the distributed topology as child processes — a Daphne gateway,
``SERVE_WORKERS`` worker processes, a Celery worker and Celery beat — restarting none: if one exits,
all are stopped and the command fails, so an outer supervisor (systemd, k8s) sees it. SIGINT or
SIGTERM stops every child cleanly. ``SERVE_ROLES`` picks the roles on this machine, so more gateways
or workers can be added on other machines sharing the same Redis and database.

Migrations run first. On PostgreSQL they hold an advisory lock, so machines that start together
(gateways and workers of one deployment) take turns instead of racing to create the same tables.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from veena_site.preflight import check_engines

logger = logging.getLogger(__name__)

ROLES = ("gateway", "worker", "celery", "beat")
MIGRATE_LOCK = 0x7665656E61  # pg_advisory_lock key: b"veena"


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


def role_commands(
    roles: list[str], host: str, port: int, workers: int
) -> list[list[str]]:
    """The child command lines for ``roles``."""
    py, manage = sys.executable, str(settings.BASE_DIR / "manage.py")
    table = {
        "gateway": [[py, manage, "rungateway", "--host", host, "--port", str(port)]],
        "worker": [[py, manage, "gpuworker"] for _ in range(workers)],
        "celery": [
            [py, "-m", "celery", "-A", "veena_site", "worker", "-l", "INFO", "-c", "1"]
        ],
        "beat": [
            [
                py,
                "-m",
                "celery",
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
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument(
            "--port", type=int, default=int(os.environ.get("PORT", "8000"))
        )

    def handle(self, *args: Any, host: str, port: int, **options: Any) -> None:
        roles = [
            r for r in os.environ.get("SERVE_ROLES", ",".join(ROLES)).split(",") if r
        ]
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
        workers = int(os.environ.get("SERVE_WORKERS", "1"))
        sys.exit(self.supervise(role_commands(roles, host, port, workers)))

    def supervise(self, commands: list[list[str]]) -> int:
        """Run every child until one exits or a signal arrives; stop all; return the status."""
        stopping = False

        def on_signal(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        children = [subprocess.Popen(cmd) for cmd in commands]
        names = {
            child.pid: " ".join(cmd[2:4])
            for child, cmd in zip(children, commands, strict=True)
        }
        logger.info("distributed topology: %d processes started", len(children))
        status = 0
        while not stopping:
            exited = [c for c in children if c.poll() is not None]
            if exited:
                logger.error(
                    "child %s exited with %s; stopping all",
                    names[exited[0].pid],
                    exited[0].returncode,
                )
                status = 1
                break
            time.sleep(0.2)
        self.stop(children)
        return status

    @staticmethod
    def stop(children: list[subprocess.Popen[bytes]]) -> None:
        """SIGTERM every child, then SIGKILL what is left after the grace period."""
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        # Gateways drain their streams for TTS_DRAIN_S before they exit (tts W12).
        deadline = time.monotonic() + float(settings.TTS_DRAIN_S) + 10.0
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
