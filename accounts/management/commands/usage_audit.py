"""``manage.py usage_audit [--since ISO] [--until ISO] [--fix]``: reconcile usage (issue 30).

Compares records, quota counters and the hourly and daily rollups of a range
(``services.reconciliation``), prints every difference and exits 1 when there is any. With
``--fix`` it rebuilds the range's rollups and recounts its quota periods, then audits again.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from accounts.management.moments import iso_moment
from accounts.services.reconciliation import usage_drift, usage_drift_fix
from gateway.wording import count

DEFAULT_DAYS = 2


def _moment(text: str | None, default: datetime) -> datetime:
    if not text:
        return default
    return iso_moment(text, f"not an ISO date or time: {text!r}")


class Command(BaseCommand):
    """Print the drift between records, quota counters and rollups; exit 1 on any."""

    help = (
        "Compare usage records, quota counters and hourly/daily rollups for a range "
        f"(default: the last {count(DEFAULT_DAYS, 'day')}), print the drift, exit 1 on any; "
        "--fix rebuilds the rollups and recounts the quota periods first."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since", help="Start, ISO date or time (UTC if naive).")
        parser.add_argument("--until", help="End, ISO date or time (default: now).")
        parser.add_argument(
            "--fix", action="store_true", help="Rebuild and recount, then audit."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        now = timezone.now()
        until = _moment(options["until"], now)
        since = _moment(options["since"], until - timedelta(days=DEFAULT_DAYS))
        if since >= until:
            raise CommandError("--since must be before --until")
        if options["fix"]:
            usage_drift_fix(since=since, until=until, now=now)
        drift = usage_drift(since=since, until=until, now=now)
        for line in drift:
            self.stdout.write(str(line))
        span = f"{since.isoformat()} .. {until.isoformat()}"
        if drift:
            raise CommandError(f"usage drift: {len(drift)} difference(s) in {span}")
        self.stdout.write(f"usage audit clean: {span}")
