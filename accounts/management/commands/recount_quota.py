"""``manage.py recount_quota``: recompute QuotaCounter from UsageRecord (accounts Q3, T4)."""

from __future__ import annotations

import re
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.services.quota import (
    current_periods,
    period_start,
    quota_recount,
    retention_start,
)


class Command(BaseCommand):
    """Set each counter to the sum of its records; changes nothing when they agree."""

    help = (
        "Recompute quota counters from usage records, for --period YYYY-MM or this month "
        "and the last."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--period", help="The month to recount, YYYY-MM (UTC).")

    def handle(self, *args: Any, **options: Any) -> None:
        period = options["period"]
        if period is None:
            periods = current_periods()
        else:
            if not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", period):
                raise CommandError("--period must be YYYY-MM")
            horizon = retention_start()
            # Some of its records may be purged: recounting would drop real usage.
            if period_start(period) < horizon:
                raise CommandError(f"{period} is older than the record retention")
            periods = [period]
        changed = quota_recount(periods=periods)
        self.stdout.write(f"{', '.join(periods)}: {changed} counter(s) corrected")
