"""Job placement: which channel a job's first message goes to.

With ``WORKER_PLACEMENT=least_loaded`` (the default) the gateway reads the liveness registry
(``gateway.liveness``; every worker republishes its slot counts within milliseconds of a slot
being taken or freed, and every ``WORKER_HEARTBEAT_S`` anyway) and sends the submission to the
live worker with the most free slots of the job's kind, on that worker's own channel
(``tts-worker.<id>``), so that in the common case the first worker asked accepts. The gateway
adds the jobs it placed itself that a worker's last status cannot include yet to that worker's
count: those still on their way, and those accepted after the status was taken (by the
worker's clock: ``gpu.job.accepted`` carries its ``sent_at``, and a status counts every job
accepted before its ``at``). So a burst from one gateway spreads over the workers instead of
piling onto the one that looked freest.

When no live worker advertises a free slot (every one full, the registry unreadable, workers
of an older version without their own channel) the job goes to the shared channel of its kind,
as with ``WORKER_PLACEMENT=shared``: whichever worker pops it first answers, and a busy one
answers ``gpu.job.busy`` so the gateway retries (``gateway.link.jobclient``).

A worker that answers busy (another gateway filled it) or stays silent (killed; its status
outlives it by up to ``WORKER_TTL_S``) is skipped until it publishes a newer status, and one
whose status is older than ``STALE_BEATS`` heartbeats is not chosen at all.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.conf import settings

from gateway.contracts import WORKER_CHANNELS, Kind
from gateway.liveness import LivenessStore, WorkerStatus, get_liveness

logger = logging.getLogger(__name__)

SNAPSHOT_MAX_AGE_S = (
    0.025  # a registry read older than this is refreshed (in the background)
)
# A snapshot older than this is read again before the choice: another gateway may have placed
# jobs since (with 1 s, 3 of 5 sequential jobs from two gateways went to the worker that
# already had one).
BLOCK_AFTER_S = 0.1
STALE_BEATS = 2.5  # a status this many heartbeats old may be a dead worker's
WARN_EVERY_S = 10.0


@dataclass(frozen=True)
class Target:
    """Where one submission goes; ``worker_id`` is empty for the shared channel."""

    channel: str
    worker_id: str = ""


class Placement:
    """Least-loaded choice of worker over a short-lived snapshot of the registry."""

    def __init__(
        self,
        store: LivenessStore,
        *,
        heartbeat_s: float,
        enabled: bool = True,
        max_age_s: float = SNAPSHOT_MAX_AGE_S,
        block_after_s: float = BLOCK_AFTER_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.block_after_s = block_after_s
        self.store, self.enabled, self.max_age_s, self.clock = (
            store,
            enabled,
            max_age_s,
            clock,
        )
        self.stale_s = STALE_BEATS * heartbeat_s
        self.snapshot: list[WorkerStatus] = []
        self._read_at = float("-inf")
        self._reading: asyncio.Task[None] | None = None
        self._warned_at = float("-inf")
        # (worker, kind) → job id → (when placed, when accepted by the worker's clock;
        # inf while the answer is on its way).
        self._placed: dict[tuple[str, str], dict[str, tuple[float, float]]] = {}
        # (worker, kind) → when it answered busy or nothing.
        self._refused: dict[tuple[str, str], float] = {}

    async def choose(
        self, kind: Kind, *, job_id: str, exclude: Iterable[str] = ()
    ) -> Target:
        """The target of submission ``job_id`` of ``kind``, skipping ``exclude``."""
        await self._fresh()  # read in shared placement too: live() answers from it
        if not self.enabled:
            return Target(WORKER_CHANNELS[kind])
        best = self.pick(kind, exclude=exclude)
        if best is None:
            return Target(WORKER_CHANNELS[kind])
        placed = self._placed.setdefault((best.worker_id, kind), {})
        placed[job_id] = (self.clock(), float("inf"))
        return Target(best.channels[kind], best.worker_id)

    def accepted(self, worker_id: str, kind: Kind, job_id: str, at: float) -> None:
        """The worker accepted ``job_id`` at ``at`` (its clock): its statuses from then on
        count the job."""
        placed = self._placed.get((worker_id, kind), {})
        if job_id in placed:
            placed[job_id] = (placed[job_id][0], at)

    def pick(self, kind: Kind, *, exclude: Iterable[str] = ()) -> WorkerStatus | None:
        """The worker of the current snapshot with the most free slots (ties: at random)."""
        skip = set(exclude)
        now = self.clock()
        best: list[WorkerStatus] = []
        most = 0
        for status in self.snapshot:
            if status.worker_id in skip or not self._eligible(status, kind, now):
                continue
            free = self.free(status, kind)
            if free > most:
                best, most = [status], free
            elif free == most and free > 0:
                best.append(status)
        return random.choice(best) if best else None

    def live(self, kind: Kind) -> bool:
        """Whether the snapshot holds a fresh status of a worker with ``kind`` loaded, busy
        or not, answering or not: a job that gets no answer then waits for load, not for a
        model."""
        now = self.clock()
        return any(
            status.serves(kind) and now - status.at <= self.stale_s
            for status in self.snapshot
        )

    def free(self, status: WorkerStatus, kind: Kind) -> int:
        """Free slots of ``kind`` on the worker, less the jobs placed there by this process
        that ``status`` does not count yet."""
        placed = self._placed.get((status.worker_id, kind), {})
        return status.free(kind) - sum(
            1 for _, accepted in placed.values() if accepted >= status.at
        )

    def forget(self, worker_id: str, kind: Kind, job_id: str) -> None:
        """The job was withdrawn before any answer: stop counting it."""
        self._placed.get((worker_id, kind), {}).pop(job_id, None)

    def refused(self, worker_id: str, kind: Kind, job_id: str = "") -> None:
        """The worker answered busy or not at all: skip it until its next status."""
        self._refused[(worker_id, kind)] = self.clock()
        self._placed.get((worker_id, kind), {}).pop(job_id, None)

    def _eligible(self, status: WorkerStatus, kind: Kind, now: float) -> bool:
        if not status.serves(kind) or kind not in status.channels:
            return False
        if now - status.at > self.stale_s:
            return False
        refused = self._refused.get((status.worker_id, kind))
        return refused is None or refused < status.at

    async def _fresh(self) -> None:
        """Refresh a snapshot older than ``max_age_s`` in the background; wait for the
        read only when the snapshot is older than ``BLOCK_AFTER_S`` (the first job after
        a quiet spell), so that a busy gateway does not wait for the registry."""
        age = self.clock() - self._read_at
        if age <= self.max_age_s:
            return
        reading = self._reading
        if reading is None or reading.done():
            reading = self._reading = asyncio.ensure_future(self._read())
        if age > self.block_after_s:
            await asyncio.shield(reading)

    async def _read(self) -> None:
        try:
            statuses = await self.store.read()
        except Exception:  # boundary: an unreadable registry means the shared channel
            now = self.clock()
            if now - self._warned_at > WARN_EVERY_S:
                self._warned_at = now
                logger.warning(
                    "liveness registry unreadable; using the shared channels"
                )
            statuses = []
        now = self.clock()
        self.snapshot, self._read_at = statuses, now
        horizon = now - self.stale_s
        for key, jobs in list(self._placed.items()):
            kept = {j: v for j, v in jobs.items() if v[0] > horizon}
            if kept:
                self._placed[key] = kept
            else:
                del self._placed[key]
        for key, at in list(self._refused.items()):
            if at <= horizon:
                del self._refused[key]


_placement: Placement | None = None


def get_placement() -> Placement:
    """The process's placement over its liveness store and the current settings."""
    global _placement
    store = get_liveness()
    enabled = settings.WORKER_PLACEMENT != "shared"
    current = _placement
    if current is None or current.store is not store or current.enabled != enabled:
        current = _placement = Placement(
            store, heartbeat_s=settings.WORKER_HEARTBEAT_S, enabled=enabled
        )
    return current
