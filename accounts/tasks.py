"""Celery tasks (accounts T1, T2): thin, idempotent, single-flight, primitives only.

Beat runs them on ``CELERY_BEAT_SCHEDULE``; the embedded default runs the same functions
in-process (``accounts.scheduler``). Each imports its service inside the body.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from celery import shared_task


def single_flight(
    name: str, *, ttl_s: float
) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """Run the task body only while holding the store lock ``name`` (G7); else return 0."""

    def decorate(fn: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> int:
            from accounts.limits import single_flight as lock

            with lock(name, ttl_s=ttl_s) as held:
                return fn(*args, **kwargs) if held else 0

        return wrapper

    return decorate


@shared_task(name="accounts.reap_abandoned_usage", time_limit=60)
@single_flight("reap_abandoned_usage", ttl_s=60)
def reap_abandoned_usage(now: str | None = None) -> int:
    """U10: land the journal's finalizations, then settle stale started records."""
    from datetime import datetime

    from django.conf import settings
    from django.utils import timezone

    from accounts.journal import JournalUnavailable, get_journal
    from accounts.services.settling import usage_journal_settle, usage_reap_abandoned

    moment = datetime.fromisoformat(now) if now else timezone.now()
    stale = settings.USAGE_STALE_SECONDS
    journal = get_journal()
    try:
        usage_journal_settle(journal=journal, now=moment, stale_seconds=stale)
    except JournalUnavailable:
        pass  # the reaper below postpones itself too
    return usage_reap_abandoned(now=moment, stale_seconds=stale, journal=journal)


@shared_task(name="accounts.sweep_leases", time_limit=60)
@single_flight("sweep_leases", ttl_s=60)
def sweep_leases() -> int:
    """C4 housekeeping: drop expired leases everywhere."""
    from accounts.limits import get_limiter

    return get_limiter().sweep()


@shared_task(name="accounts.rollup_usage_hourly", time_limit=300)
def rollup_usage_hourly() -> int:
    """G4: recompute the hourly rows of the lookback window."""
    from accounts.services.rollups import usage_rollup_single_flight

    return usage_rollup_single_flight(granularity="hour") or 0


@shared_task(name="accounts.rollup_usage_daily", time_limit=300)
def rollup_usage_daily() -> int:
    """G5: recompute yesterday's and today's daily rows."""
    from accounts.services.rollups import usage_rollup_single_flight

    return usage_rollup_single_flight(granularity="day") or 0


@shared_task(name="accounts.rollup_usage_range", time_limit=600)
def rollup_usage_range(since: str, until: str, granularity: str | None = None) -> int:
    """G5, D8: recompute a range (ISO bounds); hourly, then daily, unless one is named."""
    from datetime import datetime

    from accounts.services.rollups import usage_rollup_single_flight

    return sum(
        usage_rollup_single_flight(
            granularity=g,
            since=datetime.fromisoformat(since),
            until=datetime.fromisoformat(until),
        )
        or 0
        for g in ([granularity] if granularity else ["hour", "day"])
    )


@shared_task(name="accounts.reconcile_quota_mirror", time_limit=120)
@single_flight("reconcile_quota_mirror", ttl_s=120)
def reconcile_quota_mirror() -> int:
    """Q11: set idle accounts' mirrors to QuotaCounter for this month and the last."""
    from accounts.services.quota import current_periods, quota_reconcile

    return quota_reconcile(periods=current_periods())


@shared_task(name="accounts.purge_usage_records", time_limit=600)
@single_flight("purge_usage_records", ttl_s=600)
def purge_usage_records() -> int:
    """U12: delete records older than ``USAGE_RECORD_RETENTION_DAYS``."""
    from accounts.services.quota import retention_start
    from accounts.services.usage import usage_purge

    return usage_purge(before=retention_start())


@shared_task(name="accounts.check_quota_alerts", time_limit=120)
@single_flight("check_quota_alerts", ttl_s=120)
def check_quota_alerts() -> int:
    """Fire each crossed quota threshold once per period, then deliver pending alerts."""
    from accounts.services.alerts import quota_alerts_check

    return quota_alerts_check()


@shared_task(name="accounts.deliver_webhook", time_limit=60)
def deliver_webhook(delivery_id: str) -> int:
    """Attempt one webhook delivery now, if it is due (enqueued on commit)."""
    from accounts.services.webhooks import webhook_attempt

    return int(webhook_attempt(delivery_id=delivery_id))


@shared_task(name="accounts.deliver_webhooks", time_limit=300)
@single_flight("deliver_webhooks", ttl_s=300)
def deliver_webhooks() -> int:
    """Attempt each due webhook delivery: new ones, and retries whose wait is over."""
    from accounts.services.webhooks import webhook_deliver_due

    return webhook_deliver_due()


@shared_task(name="accounts.purge_webhook_deliveries", time_limit=600)
@single_flight("purge_webhook_deliveries", ttl_s=600)
def purge_webhook_deliveries() -> int:
    """Delete finished webhook deliveries older than ``USAGE_RECORD_RETENTION_DAYS``."""
    from accounts.services.quota import retention_start
    from accounts.services.webhooks import webhook_deliveries_purge

    return webhook_deliveries_purge(before=retention_start())


@shared_task(name="accounts.purge_client_secrets", time_limit=120)
@single_flight("purge_client_secrets", ttl_s=120)
def purge_client_secrets() -> int:
    """Delete client secrets that expired more than a day ago (issue 35)."""
    from accounts.services.client_secrets import client_secrets_purge

    return client_secrets_purge()


@shared_task(name="accounts.audit_usage", time_limit=300)
@single_flight("audit_usage", ttl_s=300)
def audit_usage() -> int:
    """Issue 30: reconcile the last hours; the drift goes to ``veena_usage_drift``."""
    from accounts.audit_metrics import usage_audit_recent

    return usage_audit_recent()


# Every periodic task by its Celery name: what the embedded scheduler runs (T3).
PERIODIC_TASKS: dict[str, Callable[[], int]] = {
    "accounts.reap_abandoned_usage": reap_abandoned_usage,
    "accounts.sweep_leases": sweep_leases,
    "accounts.rollup_usage_hourly": rollup_usage_hourly,
    "accounts.rollup_usage_daily": rollup_usage_daily,
    "accounts.reconcile_quota_mirror": reconcile_quota_mirror,
    "accounts.purge_usage_records": purge_usage_records,
    "accounts.check_quota_alerts": check_quota_alerts,
    "accounts.deliver_webhooks": deliver_webhooks,
    "accounts.purge_webhook_deliveries": purge_webhook_deliveries,
    "accounts.purge_client_secrets": purge_client_secrets,
    "accounts.audit_usage": audit_usage,
}
