"""``manage.py rollup_usage``: recompute usage rollups on demand (accounts G5, T4)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from accounts.management.moments import iso_moment
from accounts.services.rollups import rebuildable_since, usage_rollup_single_flight


def _moment(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    return iso_moment(value, f"{option} must be an ISO date or datetime")


class Command(BaseCommand):
    """Recompute hourly then daily rows (or one granularity) over a range; idempotent."""

    help = (
        "Recompute usage rollups. Without --since/--until: the hourly lookback window and "
        "yesterday/today for daily rows. Times are ISO 8601, UTC unless an offset is given."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since", help="Start (ISO 8601).")
        parser.add_argument("--until", help="End, exclusive (ISO 8601).")
        parser.add_argument(
            "--granularity", choices=["hour", "day"], help="Only this granularity."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        since = _moment(options["since"], "--since")
        until = _moment(options["until"], "--until")
        if since and until and until <= since:
            raise CommandError("--until must be after --since")
        granularities = (
            [options["granularity"]] if options["granularity"] else ["hour", "day"]
        )
        for granularity in granularities:
            kept = rebuildable_since(granularity, timezone.now())
            if since is not None and kept is not None and since < kept:
                self.stdout.write(
                    f"{granularity}: buckets before {kept.isoformat()} kept: their usage "
                    "records are past USAGE_RECORD_RETENTION_DAYS and cannot rebuild them"
                )
            rows = usage_rollup_single_flight(
                granularity=granularity, since=since, until=until
            )
            if rows is None:
                raise CommandError(
                    f"Another {granularity} rollup is running; try again later."
                )
            self.stdout.write(f"{granularity}: {rows} rows")
