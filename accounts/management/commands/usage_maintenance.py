"""``manage.py usage_maintenance``: the periodic jobs, once (accounts T3)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from accounts.tasks import (
    reap_abandoned_usage,
    reconcile_quota_mirror,
    rollup_usage_daily,
    rollup_usage_hourly,
    sweep_leases,
)


class Command(BaseCommand):
    """Reap abandoned records, sweep leases, roll up, reconcile quota mirrors."""

    help = (
        "Run the reaper, the lease sweep, both rollups and quota reconciliation once "
        "(what beat, or the embedded scheduler, does periodically)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        for label, task in (
            ("abandoned records reaped", reap_abandoned_usage),
            ("expired leases swept", sweep_leases),
            ("hourly rollup rows", rollup_usage_hourly),
            ("daily rollup rows", rollup_usage_daily),
            ("quota mirrors reconciled", reconcile_quota_mirror),
        ):
            self.stdout.write(f"{label}: {task()}")
