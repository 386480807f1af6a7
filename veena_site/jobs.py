"""The worker's job registry: one asyncio task per job, bounded by slots per kind.

Each job runs as its own task (STYLE 29), sends a heartbeat every second while it runs, catches
every exception at its boundary and replies ``gpu.job.failed`` with a stable code (STYLE 31), and
frees its slot on every exit path, exactly once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer

from veena_site.contracts import JobFailed, JobHeartbeat, Kind, Message

logger = logging.getLogger(__name__)

SEND_PATIENCE_S = 10.0


class ReplyLost(Exception):
    """The gateway's reply channel stayed full for ``SEND_PATIENCE_S``: it is gone."""


class WorkerJob(Protocol):
    """A job the registry can run: TTS synthesis or one realtime ASR session."""

    kind: Kind
    job_id: str
    reply_channel: str

    async def run(self) -> None:
        """Do the job's work, sending replies; return when it is finished."""
        ...

    def receive(self, message: dict[str, Any]) -> None:
        """Take a later message pinned to this job (ack, audio, commit …) without blocking."""
        ...


Sender = Callable[[Message], Awaitable[None]]


def reply_sender(layer: BaseChannelLayer, channel: str) -> Sender:
    """Return a coroutine function that sends messages to ``channel``, waiting out ChannelFull."""

    async def send(message: Message) -> None:
        deadline = time.monotonic() + SEND_PATIENCE_S
        delay = 0.005
        while True:
            try:
                await layer.send(channel, message.to_message())
                return
            except ChannelFull:
                if time.monotonic() > deadline:
                    raise ReplyLost(channel) from None
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.2)

    return send


class JobRegistry:
    """Running jobs by id, with a slot limit per kind."""

    def __init__(self, slots: dict[Kind, int], heartbeat_s: float) -> None:
        self.slots = dict(slots)
        self.heartbeat_s = heartbeat_s
        self._jobs: dict[str, WorkerJob] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._senders: dict[str, Sender] = {}

    def busy(self, kind: Kind) -> int:
        """Number of slots of ``kind`` in use."""
        return sum(1 for job in self._jobs.values() if job.kind == kind)

    def has_room(self, kind: Kind) -> bool:
        """True when a job of ``kind`` could start now."""
        return self.busy(kind) < self.slots.get(kind, 0)

    def get(self, job_id: str) -> WorkerJob | None:
        """The running job with this id, if any."""
        return self._jobs.get(job_id)

    def start(self, job: WorkerJob, send: Sender, accepted: Message) -> None:
        """Take a slot for ``job`` and run it as a task that first sends ``accepted``."""
        assert self.has_room(job.kind), "caller checks has_room first"
        self._jobs[job.job_id] = job
        self._senders[job.job_id] = send
        task = asyncio.create_task(self._supervise(job, send, accepted))
        self._tasks[job.job_id] = task

    def cancel(self, job_id: str) -> bool:
        """Cancel a job; its slot is freed as the task unwinds. False if unknown."""
        task = self._tasks.get(job_id)
        if task is None:
            return False
        task.cancel()
        self._release(job_id)
        return True

    async def cancel_all(self, code: str | None = None) -> None:
        """Cancel every job (worker shutdown), telling each gateway when ``code`` is given."""
        for job_id in list(self._jobs):
            send = self._senders[job_id]
            self.cancel(job_id)
            if code is not None:
                await _send_quietly(send, JobFailed(job_id=job_id, code=code))

    async def wait_idle(self) -> None:
        """Wait until every task has finished unwinding."""
        tasks = list(self._tasks.values())
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _release(self, job_id: str) -> None:
        self._jobs.pop(job_id, None)
        self._senders.pop(job_id, None)

    async def _supervise(self, job: WorkerJob, send: Sender, accepted: Message) -> None:
        beat = asyncio.create_task(self._heartbeat(job, send))
        try:
            await send(accepted)
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
            self._release(job.job_id)
            self._tasks.pop(job.job_id, None)

    async def _heartbeat(self, job: WorkerJob, send: Sender) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            await _send_quietly(send, JobHeartbeat(job_id=job.job_id))


async def _send_quietly(send: Sender, message: Message) -> None:
    try:
        await send(message)
    except (
        Exception
    ):  # boundary: a reply that cannot be delivered is logged, not raised
        logger.warning(
            "reply %s for job %s not delivered", message.TYPE, message.job_id
        )
