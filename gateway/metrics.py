"""Prometheus metrics of the gateway and the worker."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

REQUESTS = Counter(
    "veena_requests_total", "Requests and sessions started", ["endpoint"]
)
ERRORS = Counter("veena_errors_total", "Errors sent to clients", ["endpoint", "code"])
AUTH_FAILURES = Counter(
    "veena_auth_failures_total",
    "Requests refused before a key was known (no account's usage), by reason",
    ["endpoint", "reason"],
)
TTFB = Histogram(
    "veena_ttfb_seconds",
    "Time from request to first audio (TTS) or first text (ASR)",
    ["endpoint"],
    buckets=(0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0),
)
RTF = Histogram(
    "veena_rtf",
    "Real-time factor: processing time / audio time",
    ["endpoint"],
    buckets=(0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 5.0),
)
ACTIVE_STREAMS = Gauge("veena_active_streams", "Open WebSocket streams", ["endpoint"])
CHANNEL_HOP = Histogram(
    "veena_channel_hop_seconds",
    "Latency of one channel-layer hop from worker to gateway",
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5),
)

PLACEMENTS = Counter(
    "veena_job_placements_total",
    "Job submissions by where they went: a chosen worker's own channel, or the shared one",
    ["kind", "target"],
)


class WorkerSlotsCollector(Collector):
    """Reports worker slots in use from the liveness store at scrape time."""

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """Name the families without reading the store (registration happens at import)."""
        yield from self._families()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from gateway.liveness import get_liveness

        in_use, total = self._families()
        for status in get_liveness().live_workers():
            for kind, size in status.slots.items():
                total.add_metric([status.worker_id, kind], size)
                in_use.add_metric([status.worker_id, kind], status.busy.get(kind, 0))
        yield in_use
        yield total

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        labels = ["worker", "kind"]
        return (
            GaugeMetricFamily(
                "veena_worker_slots_in_use", "Busy worker slots", labels=labels
            ),
            GaugeMetricFamily("veena_worker_slots", "Worker slots", labels=labels),
        )


REGISTRY.register(WorkerSlotsCollector())
