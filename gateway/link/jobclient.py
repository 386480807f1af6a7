"""The gateway side of one worker job: admission with retries, pinning, and loss detection.

A consumer never awaits a worker reply inside a handler (tts Q5, realtime AR-3): it submits and
returns. Replies and timers arrive as separate dispatched messages; timers are posted to the
consumer's own channel as ``timer.fire`` so that the dispatch loop serialises every state change.
The consumer passes each ``gpu.job.*`` reply and each timer to this link and acts on the outcome.

While a job is pinned, the link sends ``*.job.keepalive`` to its worker: one at once (the
confirmation of the acceptance) and then one every ``JOB_KEEPALIVE_S`` from a task of its own,
so a consumer busy in one long handler (a 15 MiB append) keeps its job. The task ends with the
link: ``close()``, or ``abandon()`` when the consumer ends (a crash included); a process that
dies takes it along. A consumer whose dispatch loop has not handled one of the link's stall
checks for ``CONSUMER_HUNG_S`` is stuck for good, and the task ends too. The worker ends a job
whose keepalives stop (``gateway.worker.jobs``).

A job still being admitted has no pinned worker yet, and a cancel on the shared channel could
be taken by a worker that does not hold it. So a cancel never goes there: whichever worker
accepts the job gets the cancel on its own channel when its ``gpu.job.accepted`` arrives, from
the consumer while it lives (``on_reply`` answers acceptances after ``close``) and from
``abandon()`` after it has ended, which reads the consumer's channel until no acceptance can
still come. Should even that fail (the gateway process died), the worker ends the job when no
confirmation arrives within ``gateway.worker.jobs.CONFIRM_S``.

Each attempt goes where ``gateway.link.placement`` says: the least-loaded live worker's own
channel, or the shared channel. A worker asked directly that answers busy or not_ready, or
nothing within ``DIRECT_ANSWER_S`` (killed), is skipped for the rest of the admission, and the
next attempt goes at once to the next worker with a free slot; only when none is left does the
link wait 25–50 ms and ask again. Every attempt is a new job id; the first acceptance of any
attempt of the admission wins, and a later one is cancelled like any stray one.

Every attempt carries the admission's own deadline (the answer time plus the admission wait),
so a worker that is only slow (a starved CPU: one event loop behind 200 sockets) still accepts
it. Silence means "not loaded" only when the liveness registry knows no live worker of the
kind; while one is live, a late answer is load, and the admission ends as overloaded.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import time
import uuid
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer
from django.conf import settings

from gateway.contracts import CANCELS, KEEPALIVES, JobAccepted, Kind, Message
from gateway.link import unanswered
from gateway.link.placement import get_placement
from gateway.link.states import Transitions
from gateway.link.timers import post_patiently
from gateway.metrics import CHANNEL_HOP, PLACEMENTS
from gateway.outages import cancel_pending

logger = logging.getLogger(__name__)

TIMER = "timer.fire"
STALL_CHECK_S = 0.5
CONSUMER_HUNG_S = 60.0  # no stall check dispatched for this long: keepalives end
# A worker asked on its own channel answers within milliseconds; silence this long means it
# is gone (its status outlives a kill -9), and the job is offered elsewhere.
DIRECT_ANSWER_S = 0.25
# The admission's timers: cancelled on acceptance, so they cost no channel round trips after.
ADMISSION_TIMERS = frozenset(("answer", "give_up", "retry", "redirect"))


class Outcome(enum.Enum):
    """What a reply or timer means for the consumer."""

    ACCEPTED = "accepted"
    OVERLOADED = "overloaded"  # every slot busy for the whole admission wait
    NOT_LOADED = "not_loaded"  # no answer, or only not_ready, within the answer time
    LOST = "lost"  # the pinned worker went silent


class Phase(enum.Enum):
    """Lifecycle of the link; transitions only move forward (``PHASES``)."""

    IDLE = enum.auto()
    SUBMITTING = enum.auto()
    ACCEPTED = enum.auto()
    CLOSED = enum.auto()


PHASES = Transitions(
    {
        Phase.IDLE: {Phase.SUBMITTING, Phase.CLOSED},
        Phase.SUBMITTING: {Phase.ACCEPTED, Phase.CLOSED},
        Phase.ACCEPTED: {Phase.CLOSED},
        Phase.CLOSED: (),
    }
)


class WorkerLink:
    """Admission and pinning of one job for one consumer."""

    def __init__(
        self,
        *,
        layer: BaseChannelLayer,
        own_channel: str,
        kind: Kind,
        answer_ms: int,
        wait_ms: int,
        stall_s: float,
    ) -> None:
        self.layer, self.own_channel, self.kind = layer, own_channel, kind
        self.answer_s, self.wait_s, self.stall_s = (
            answer_ms / 1000,
            wait_ms / 1000,
            stall_s,
        )
        self.phase = Phase.IDLE
        self.job_id = ""
        self.worker_channel = ""
        self.model_version = ""
        self._first: dict[str, Any] = {}
        self._started = 0.0
        self._saw_busy = False
        self._last_seen = 0.0
        self._dispatched_at = 0.0  # when the consumer last handled one of our timers
        self._timers: set[asyncio.Task[None]] = set()
        self._admission_timers: set[asyncio.Task[None]] = set()
        # Names this link's timers, so one left over from a replaced link is ignored.
        self.token = uuid.uuid4().hex[:12]
        self._id_base = ""
        self._attempts = 0
        # The worker asked in the current attempt ("" = shared channel).
        self._target = ""
        self._answered = False  # the current attempt got a reply
        self._skip: set[str] = set()  # workers that refused this admission
        self._deadline = 0.0  # the admission's end, by the wall clock the workers read
        # The job id of every attempt → the worker asked ("" = shared channel).
        self._asked: dict[str, str] = {}

    async def submit(
        self, first: Message, *, job_id: str | None = None
    ) -> Outcome | None:
        """Send the job's first message, ``first``, to a worker: each attempt with its own
        ``job_id``, this link's channel as ``reply_channel`` and the admission's ``deadline``.

        ``job_id`` names the first attempt (e.g. the accounts stream id, realtime WK-1); each
        retry is a new job (tts Q4), named ``<job_id>.<n>``. Without it ids are random.
        """
        self.phase = PHASES.move(self.phase, Phase.SUBMITTING)
        self._id_base = job_id or uuid.uuid4().hex
        self._started = time.monotonic()
        self._deadline = time.time() + self.answer_s + self.wait_s
        fill = {"reply_channel": self.own_channel, "deadline": self._deadline}
        self._first = first.to_message() | fill
        self._later(self.answer_s, "answer")
        self._later(self.wait_s + self.answer_s, "give_up")
        return await self._attempt()

    async def on_reply(self, message: dict[str, Any]) -> Outcome | None:
        """Handle gpu.job.accepted / busy / not_ready for this link."""
        unanswered.answered(self.own_channel, message.get("job_id"))
        kind = message["type"]
        if kind == JobAccepted.TYPE:
            return await self._on_accepted(JobAccepted.from_message(message))
        if message["job_id"] != self.job_id or self.phase is not Phase.SUBMITTING:
            return None
        self._answered = True
        if kind == "gpu.job.busy":
            self._saw_busy = True
        if time.monotonic() - self._started >= self.wait_s:
            return Outcome.OVERLOADED if self._saw_busy else Outcome.NOT_LOADED
        self._later(self._refuse(), "retry")
        return None

    async def on_timer(self, message: dict[str, Any]) -> Outcome | None:
        """Handle a ``timer.fire`` posted by this link (others are ignored)."""
        if message.get("token") != self.token:
            return None
        self._dispatched_at = time.monotonic()
        name = message["name"]
        if name == "retry" and self.phase is Phase.SUBMITTING:
            return await self._attempt()
        if (
            name == "redirect"
            and self.phase is Phase.SUBMITTING
            and message.get("job_id") == self.job_id
            and not self._answered
            and self._elsewhere()
        ):
            self._refuse()  # silent, not busy: ask the next worker now
            return await self._attempt()
        if name == "answer" and self.phase is Phase.SUBMITTING and not self._loaded():
            return Outcome.NOT_LOADED
        if name == "give_up" and self.phase is Phase.SUBMITTING:
            return Outcome.OVERLOADED if self._loaded() else Outcome.NOT_LOADED
        if name == "stall" and self.phase is Phase.ACCEPTED:
            # A stall check can wait in the consumer's queue behind a long handler, ahead of
            # heartbeats that already arrived: confirm only after everything queued before
            # the confirmation has been dispatched.
            stalled = time.monotonic() - self._last_seen > self.stall_s
            self._later(
                0 if stalled else STALL_CHECK_S, "stall_confirm" if stalled else "stall"
            )
        if name == "stall_confirm" and self.phase is Phase.ACCEPTED:
            if time.monotonic() - self._last_seen > self.stall_s:
                return Outcome.LOST
            self._later(STALL_CHECK_S, "stall")
        return None

    def touch(self, message: dict[str, Any]) -> bool:
        """Note that the pinned worker is alive; False if the message is not this job's."""
        if message.get("job_id") != self.job_id or self.phase is not Phase.ACCEPTED:
            return False
        self._last_seen = time.monotonic()
        if "sent_at" in message:
            CHANNEL_HOP.observe(max(0.0, time.time() - message["sent_at"]))
        return True

    async def send(self, message: Message) -> bool:
        """Send a message to the pinned worker; False if the worker's channel is full."""
        assert self.phase is Phase.ACCEPTED
        try:
            await self.layer.send(self.worker_channel, message.to_message())
        except ChannelFull:
            logger.warning("%s job %s: worker channel full", self.kind, self.job_id)
            return False
        return True

    async def close(self) -> None:
        """Cancel the job at its worker and stop every timer; idempotent.

        A job still being admitted is cancelled when its acceptance arrives (module
        docstring): nothing is sent to the shared channel.
        """
        if self.phase is Phase.CLOSED:
            return
        previous = self.phase
        self.phase = PHASES.move(previous, Phase.CLOSED)
        for task in self._timers:
            task.cancel()
        self._timers.clear()
        if previous is Phase.SUBMITTING:
            self._forget_attempts()
        if previous is Phase.ACCEPTED:
            await self._cancel_at(self.worker_channel, self.job_id)

    def forget(self) -> None:
        """Drop the channel's unanswered submissions: its owner drained the channel itself
        (a REST view's own channel ends with the view)."""
        unanswered.take(self.own_channel)

    def abandon(self) -> None:
        """The consumer has ended: close, and cancel acceptances still on their way.

        Runs as a task of its own, so it may be called from a ``finally`` of a consumer
        that is being cancelled.
        """
        unanswered.drain(self._abandon())

    async def _abandon(self) -> None:
        await self.close()
        await unanswered.cancel_late_acceptances(
            self.layer, self.own_channel, self._cancel_at
        )

    async def _attempt(self) -> Outcome | None:
        assert self._first
        self.job_id = (
            self._id_base
            if self._attempts == 0
            else f"{self._id_base}.{self._attempts}"
        )
        self._attempts += 1
        target = await get_placement().choose(
            self.kind, job_id=self.job_id, exclude=self._skip
        )
        self._target, self._answered = target.worker_id, False
        self._asked[self.job_id] = target.worker_id
        unanswered.note(self.own_channel, self.job_id, self._deadline)
        PLACEMENTS.labels(self.kind, "worker" if target.worker_id else "shared").inc()
        try:
            message = self._first | {"job_id": self.job_id}
            await self.layer.send(target.channel, message)
        except ChannelFull:
            if target.worker_id:  # that worker's channel is full: try the others
                self._later(self._refuse(), "retry")
                return None
            return Outcome.OVERLOADED
        if target.worker_id:
            self._later(DIRECT_ANSWER_S, "redirect", job_id=self.job_id)
        return None

    def _forget_attempts(self, *, but: str = "") -> None:
        """Stop counting this admission's placements (all ``but`` one) at their workers."""
        placement = get_placement()
        for job_id, worker_id in self._asked.items():
            if worker_id and job_id != but:
                placement.forget(worker_id, self.kind, job_id)

    def _loaded(self) -> bool:
        """Whether a worker may still take the job: one answered busy, or the registry
        knows a live worker of the kind (a silent one is slow, not missing)."""
        return self._saw_busy or get_placement().live(self.kind)

    def _elsewhere(self) -> bool:
        """Whether a worker other than the silent current target could take the job; with
        none, a second submission would only queue behind the first at the same worker."""
        if not self._target:
            return False
        skip = self._skip | {self._target}
        return get_placement().pick(self.kind, exclude=skip) is not None

    def _refuse(self) -> float:
        """The current attempt was refused (busy, not ready, silent, full): skip its worker
        and return how long to wait before the next attempt."""
        if not self._target:
            return random.uniform(0.025, 0.05)
        placement = get_placement()
        placement.refused(self._target, self.kind, self.job_id)
        self._skip.add(self._target)
        self._target = ""
        if placement.pick(self.kind, exclude=self._skip) is not None:
            return 0.0
        self._skip.clear()  # after the pause: every worker again, by its newer status
        return random.uniform(0.025, 0.05)

    async def _on_accepted(self, accepted: JobAccepted) -> Outcome | None:
        if accepted.job_id not in self._asked or self.phase is not Phase.SUBMITTING:
            await self._cancel_at(accepted.worker_channel, accepted.job_id)
            return None
        self.phase = PHASES.move(self.phase, Phase.ACCEPTED)
        self.job_id = accepted.job_id  # an earlier attempt's late acceptance wins too
        for task in list(self._admission_timers):
            task.cancel()
        self._forget_attempts(but=accepted.job_id)
        if worker_id := self._asked[accepted.job_id]:
            get_placement().accepted(
                worker_id, self.kind, accepted.job_id, accepted.sent_at
            )
        self.worker_channel = accepted.worker_channel
        self.model_version = accepted.model_version
        self._last_seen = time.monotonic()
        CHANNEL_HOP.observe(max(0.0, time.time() - accepted.sent_at))
        self._dispatched_at = time.monotonic()
        # The first keepalive confirms the acceptance (gateway.worker.jobs.CONFIRM_S).
        await self._keepalive()
        self._later(STALL_CHECK_S, "stall")
        self._own(asyncio.create_task(self._keepalives()))
        return Outcome.ACCEPTED

    async def _keepalives(self) -> None:
        while self.phase is Phase.ACCEPTED:
            await asyncio.sleep(settings.JOB_KEEPALIVE_S)
            if time.monotonic() - self._dispatched_at > CONSUMER_HUNG_S:
                logger.warning(
                    "%s job %s: consumer stuck; keepalives stopped",
                    self.kind,
                    self.job_id,
                )
                return
            await self._keepalive()

    async def _keepalive(self) -> None:
        message = KEEPALIVES[self.kind](job_id=self.job_id).to_message()
        try:
            await self.layer.send(self.worker_channel, message)
        except Exception:  # boundary: one keepalive; the worker tolerates a few lost
            logger.warning("%s job %s: keepalive not delivered", self.kind, self.job_id)

    async def _cancel_at(self, channel: str, job_id: str) -> None:
        try:
            await self.layer.send(
                channel, CANCELS[self.kind](job_id=job_id).to_message()
            )
        except Exception:  # boundary: one cancel; the worker's keepalive rule ends it
            logger.warning("%s job %s: cancel not delivered", self.kind, job_id)

    def _later(self, delay: float, name: str, **extra: str) -> None:
        task = asyncio.create_task(self._post(delay, name, extra))
        self._own(task)
        if name in ADMISSION_TIMERS:
            self._admission_timers.add(task)
            task.add_done_callback(self._admission_timers.discard)

    def _own(self, task: asyncio.Task[None]) -> None:
        """Keep ``task`` until it ends; ``close()`` cancels it."""
        self._timers.add(task)
        task.add_done_callback(self._timers.discard)

    async def _post(self, delay: float, name: str, extra: dict[str, str]) -> None:
        await asyncio.sleep(delay)
        message = {"type": TIMER, "name": name, "link": self.kind, "token": self.token}
        message.update(extra)
        # A lost stall check would end the loss detection (so the post is retried while
        # the channel is full); one full for long belongs to a consumer that no longer reads.
        try:
            posted = await post_patiently(self.layer, self.own_channel, message)
        except Exception:  # boundary: a task of its own; an outage ends the stream
            if cancel_pending():
                raise
            logger.warning(
                "%s job %s: timer %s not posted", self.kind, self.job_id, name
            )
            return
        if not posted:
            logger.warning("%s job %s: timer dropped", self.kind, self.job_id)
