"""The worker's job registry: one asyncio task per job, bounded by slots per kind.

Each job runs as its own task (STYLE 29), sends a heartbeat every second while it runs, catches
every exception at its boundary and replies ``gpu.job.failed`` with a stable code (STYLE 31), and
frees its slot on every exit path, exactly once.

No job outlives its gateway. Every message the gateway sends for a job (acks, audio, text, and
the ``*.job.keepalive`` it sends every ``JOB_KEEPALIVE_S``) counts as a sign of life. A job
that hears nothing within ``CONFIRM_S`` of its acceptance (its consumer left while the job was
being admitted), or nothing for ``JOB_KEEPALIVE_TIMEOUT_S`` afterwards (consumer crashed, gateway
process killed, its channel no longer read), ends and frees its slot; so does one whose last
``HEARTBEAT_FAILURES`` heartbeats could not be delivered within a heartbeat period each.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import redis
from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer

from gateway.contracts import JobFailed, JobHeartbeat, Kind, Message

logger = logging.getLogger(__name__)

SEND_PATIENCE_S = 10.0
# The gateway confirms an acceptance at once (its first keepalive, or any other message of
# the job). A job accepted for a consumer that had already gone gets none and ends.
CONFIRM_S = 2.0
# Consecutive heartbeats not delivered within one heartbeat period that end a job.
HEARTBEAT_FAILURES = 3
DRAIN_POLL_S = 0.05


class ReplyLost(Exception):
    """The gateway's reply channel stayed unreachable for ``SEND_PATIENCE_S``: it is gone."""


class WorkerJob(Protocol):
    """A job the registry can run: TTS synthesis or one realtime ASR session."""

    kind: Kind
    job_id: str
    reply_channel: str

    async def run(self) -> None:
        """Do the job's work, sending replies; return when it is finished.

        Later messages pinned to the job (ack, audio, commit …) reach it through methods of
        its own, one per channel type, that the worker consumer's handlers call.
        """
        ...


Sender = Callable[[Message], Awaitable[None]]
J = TypeVar("J", bound=WorkerJob)


# A full channel, or a layer whose connection failed (a Redis restart): worth waiting out.
TRANSIENT = (ChannelFull, redis.ConnectionError, redis.TimeoutError, OSError)


def reply_sender(layer: BaseChannelLayer, channel: str) -> Sender:
    """Return a coroutine function that sends messages to ``channel``, waiting out
    ChannelFull and a layer outage for up to ``SEND_PATIENCE_S``."""

    async def send(message: Message) -> None:
        deadline = time.monotonic() + SEND_PATIENCE_S
        delay = 0.005
        while True:
            try:
                await layer.send(channel, message.to_message())
                return
            except TRANSIENT:
                if time.monotonic() > deadline:
                    raise ReplyLost(channel) from None
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.2)

    return send


@dataclass
class _Entry:
    """One running job and what the registry knows about its gateway."""

    job: WorkerJob
    send: Sender
    task: asyncio.Task[None] | None = None
    accepted_at: float | None = None  # monotonic, once gpu.job.accepted went out
    heard_at: float | None = None  # the gateway's last message for the job
    failed_beats: int = 0


class JobRegistry:
    """Running jobs by id, with a slot limit per kind."""

    def __init__(
        self,
        slots: dict[Kind, int],
        heartbeat_s: float,
        *,
        keepalive_timeout_s: float = 5.0,
        confirm_s: float = CONFIRM_S,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.slots = dict(slots)
        # Called whenever a slot is taken or freed (the runtime republishes its liveness).
        self.on_change = on_change
        self.heartbeat_s = heartbeat_s
        self.keepalive_timeout_s = keepalive_timeout_s
        self.confirm_s = confirm_s
        self._entries: dict[str, _Entry] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._notices: set[asyncio.Task[None]] = set()

    def busy(self, kind: Kind) -> int:
        """Number of slots of ``kind`` in use."""
        return sum(1 for e in self._entries.values() if e.job.kind == kind)

    def has_room(self, kind: Kind) -> bool:
        """True when a job of ``kind`` could start now."""
        return self.busy(kind) < self.slots.get(kind, 0)

    @property
    def running(self) -> dict[str, WorkerJob]:
        """The jobs holding a slot now, by id."""
        return {job_id: e.job for job_id, e in self._entries.items()}

    def get(self, job_id: str) -> WorkerJob | None:
        """The running job with this id, if any."""
        entry = self._entries.get(job_id)
        return entry.job if entry is not None else None

    def pinned(self, job_id: str, kind: type[J]) -> J | None:
        """The running job ``job_id`` if it is a ``kind``, for a message pinned to it; any
        message of a job is a sign of its gateway."""
        self.touch(job_id)
        job = self.get(job_id)
        return job if isinstance(job, kind) else None

    def touch(self, job_id: str) -> bool:
        """The job's gateway sent something: it is alive. False if the job is unknown."""
        entry = self._entries.get(job_id)
        if entry is None:
            return False
        entry.heard_at = time.monotonic()
        return True

    def start(self, job: WorkerJob, send: Sender, accepted: Message) -> None:
        """Take a slot for ``job`` and run it as a task that first sends ``accepted``."""
        assert self.has_room(job.kind), "caller checks has_room first"
        entry = self._entries[job.job_id] = _Entry(job=job, send=send)
        entry.task = asyncio.create_task(self._supervise(entry, accepted))
        self._tasks[job.job_id] = entry.task
        self._changed()

    def cancel(self, job_id: str) -> bool:
        """Cancel a job; its slot is freed as the task unwinds. False if unknown."""
        task = self._tasks.get(job_id)
        if task is None:
            return False
        task.cancel()
        if self._entries.pop(job_id, None) is not None:
            self._changed()
        return True

    async def cancel_all(self, code: str | None = None) -> None:
        """Cancel every job (worker shutdown), telling each gateway when ``code`` is given."""
        for job_id, entry in list(self._entries.items()):
            self.cancel(job_id)
            if code is not None:
                await _send_quietly(entry.send, JobFailed(job_id=job_id, code=code))

    async def drain(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for the running jobs to end by themselves (finished,
        or cancelled by their gateways); the number still running."""
        deadline = time.monotonic() + timeout_s
        while self._entries and time.monotonic() < deadline:
            await asyncio.sleep(DRAIN_POLL_S)
        return len(self._entries)

    async def wait_idle(self) -> None:
        """Wait until every task has finished unwinding."""
        tasks = list(self._tasks.values())
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    async def _supervise(self, entry: _Entry, accepted: Message) -> None:
        job, send = entry.job, entry.send
        beat = asyncio.create_task(self._watch(entry))
        try:
            await send(accepted)
            entry.accepted_at = time.monotonic()
            await job.run()
        except asyncio.CancelledError:
            logger.info("%s job %s cancelled", job.kind, job.job_id)
        except ReplyLost:
            logger.warning(
                "%s job %s: gateway stopped reading; job dropped", job.kind, job.job_id
            )
        except Exception:  # boundary: one job
            logger.exception("%s job %s failed", job.kind, job.job_id)
            await _send_quietly(
                send, JobFailed(job_id=job.job_id, code="inference_failed")
            )
        finally:
            beat.cancel()
            if self._entries.get(job.job_id) is entry:
                del self._entries[job.job_id]
                self._changed()
            if self._tasks.get(job.job_id) is entry.task:
                del self._tasks[job.job_id]

    async def _watch(self, entry: _Entry) -> None:
        """Every heartbeat period: send a heartbeat, and end the job if its gateway is gone."""
        while True:
            await asyncio.sleep(self.heartbeat_s)
            beat = entry.send(JobHeartbeat(job_id=entry.job.job_id))
            try:
                await asyncio.wait_for(beat, self.heartbeat_s)
                entry.failed_beats = 0
            except Exception:  # boundary: a heartbeat that cannot be delivered counts
                entry.failed_beats += 1
            reason = self._gone(entry)
            if reason is not None:
                self._abandon(entry, reason)
                return

    def _gone(self, entry: _Entry) -> str | None:
        """Why the job's gateway counts as gone, or None while it is there."""
        if entry.failed_beats >= HEARTBEAT_FAILURES:
            return f"{entry.failed_beats} heartbeats not delivered"
        if entry.accepted_at is None:
            return None
        now = time.monotonic()
        if entry.heard_at is None:
            late = now - entry.accepted_at > self.confirm_s
            return "acceptance never confirmed" if late else None
        silent = now - entry.heard_at
        if silent > self.keepalive_timeout_s:
            return f"gateway silent for {silent:.1f} s"
        return None

    def _abandon(self, entry: _Entry, reason: str) -> None:
        job = entry.job
        logger.warning("%s job %s ended: %s", job.kind, job.job_id, reason)
        if self.cancel(job.job_id):
            # In case the gateway is alive after all (its keepalives were lost): it fails
            # the request at once instead of waiting for the heartbeats to stop.
            failed = JobFailed(job_id=job.job_id, code="gateway_lost")
            notice = asyncio.create_task(
                _send_quietly(entry.send, failed, timeout_s=self.heartbeat_s)
            )
            self._notices.add(notice)
            notice.add_done_callback(self._notices.discard)


async def _send_quietly(
    send: Sender, message: Message, *, timeout_s: float | None = None
) -> None:
    try:
        await asyncio.wait_for(send(message), timeout_s)
    except (
        Exception
    ):  # boundary: a reply that cannot be delivered is logged, not raised
        logger.warning(
            "reply %s for job %s not delivered", message.TYPE, message.job_id
        )
