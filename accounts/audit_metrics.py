"""The periodic usage audit's result as a Prometheus gauge (issue 30 item 6).

The task (``accounts.audit_usage``, every 10 minutes in Celery beat or the embedded
scheduler) reconciles the last ``AUDIT_HOURS`` and keeps the counts of differences by kind
in Django's cache (Redis when distributed), so any process's ``/metrics`` reports
``veena_usage_drift{kind}`` and ``veena_usage_audit_timestamp_seconds`` at scrape time.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

from django.core.cache import cache
from django.utils import timezone
from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

AUDIT_HOURS = 6
CACHE_KEY = "accounts:usage_audit"
KINDS = ("quota", "hourly", "daily", "account", "stuck")


def usage_audit_recent() -> int:
    """Audit the last ``AUDIT_HOURS``, keep the result for the gauge; the differences."""
    from accounts.services.reconciliation import usage_drift

    now = timezone.now()
    drift = usage_drift(since=now - timedelta(hours=AUDIT_HOURS), until=now, now=now)
    by_kind = Counter(d.kind for d in drift)
    for line in drift[:20]:
        logger.warning("usage drift: %s", line)
    cache.set(CACHE_KEY, {"at": now.timestamp(), "drift": dict(by_kind)}, None)
    return len(drift)


class UsageAuditCollector(Collector):
    """Reports the last audit's result from the cache at scrape time."""

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """Name the families without reading the cache (registration runs this)."""
        yield from self._families()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The last result, when an audit has run."""
        result = cache.get(CACHE_KEY)
        if not result:
            return
        drift, at = self._families()
        for kind in KINDS:
            drift.add_metric([kind], result["drift"].get(kind, 0))
        at.add_metric([], result["at"])
        yield drift
        yield at

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                "veena_usage_drift",
                "Differences the last usage audit found, by kind (0: records, quota "
                "counters and rollups agree)",
                labels=["kind"],
            ),
            GaugeMetricFamily(
                "veena_usage_audit_timestamp_seconds",
                "When the last usage audit ran (Unix time)",
                labels=[],
            ),
        )


_registered: list[UsageAuditCollector] = []


def register_collector() -> None:
    """Register the collector once per process (``AccountsConfig.ready``)."""
    if not _registered:
        _registered.append(UsageAuditCollector())
        REGISTRY.register(_registered[0])
