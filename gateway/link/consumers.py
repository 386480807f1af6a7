"""The skeleton of both API consumers (``/v1/tts/ws``, ``/v1/realtime``): one worker job
through a ``WorkerLink`` at a time, self-posted timers, the usage tick, outputs and teardown.

Both consumers are built the same way (issue 33): ``open_stream`` makes the stream's timers and
usage tick; handlers never await a worker, replies (``gpu.*``) and timers (``timer.fire``)
arrive as separately dispatched messages; the app's pure steps return output records, and
``perform`` is the one place that does them (the shared records of ``gateway.link.outputs``
here, the app's own through its ``do``); the tick asks the app's usage for a stop reason;
``end_stream`` is the one teardown, run once on every exit path. What differs between the apps
is an abstract hook (``abc``), so a consumer that lacks one cannot be made. The exception
boundary around every handler is ``gateway.link.boundary``.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Iterable
from typing import Any, ClassVar

from channels.exceptions import ChannelFull

from gateway.link.boundary import ReleaseStep, StreamBoundary
from gateway.link.jobclient import TIMER, Outcome, WorkerLink
from gateway.link.outputs import Arm, Disarm, Fail, TerminalStatus
from gateway.link.timers import TICK, TICK_S, NamedTimers, Ticker
from gateway.outages import Failure, log_failure

logger = logging.getLogger(__name__)


class WorkerClientConsumer(StreamBoundary):
    """A WebSocket stream that runs one worker job through a ``WorkerLink`` at a time."""

    # The usage record's status when the client closes the stream (tts W10, accounts U9).
    disconnect_status: ClassVar[TerminalStatus]
    link: WorkerLink | None = None
    opened = False  # ``open_stream`` ran: the stream's state exists
    released = False  # ``end_stream`` ran
    timers: NamedTimers
    ticker: Ticker

    # The hooks each app supplies (besides the boundary's: closed, send_failure, refusal).

    @abc.abstractmethod
    async def on_outcome(self, outcome: Outcome | None) -> None:
        """React to an admission or liveness decision of the link."""

    @abc.abstractmethod
    async def on_timer(self, name: str) -> None:
        """React to one of the consumer's own timers (not the link's, not the tick)."""

    @abc.abstractmethod
    async def do(self, out: Any) -> bool:
        """Do one of the app's own outputs; False: nothing after it in the list is done."""

    @abc.abstractmethod
    async def fail(self, fail: Any) -> None:
        """Send the app's failure record's error; end the request, or the stream."""

    @abc.abstractmethod
    async def tick_usage(self) -> Fail | None:
        """accounts E6: tick the usage; a stop (accounts E7) is returned as the failure."""

    @abc.abstractmethod
    def mark_closed(self) -> None:
        """The stream's state says it has ended (the teardown's first change)."""

    @abc.abstractmethod
    def record_steps(
        self, status: TerminalStatus, error_code: str, close_code: int | None
    ) -> list[ReleaseStep]:
        """The teardown's steps that finish the usage record(s), before the job ends."""

    @abc.abstractmethod
    async def release_admission(self) -> None:
        """The teardown's last step: give back the admission (after the record)."""

    async def performed(self) -> None:
        """After a list of outputs was done, on a stream still open (default: nothing)."""

    async def release_failed(self, failure: Failure, close_code: int) -> None:
        """The boundary's release: the stream ends ``failed`` with ``failure``."""
        if self.opened:
            await self.end_stream("failed", error_code=failure, close_code=close_code)

    # The stream's life: open, outputs, end.

    def open_stream(self) -> None:
        """The stream's state exists: its own timers, its usage tick, its gauge."""
        self.opened = True
        self.timers = NamedTimers(self.post_later)
        self.ticker = Ticker(self.post_now, TICK, TICK_S)
        self.count_open()

    async def perform(self, outs: Iterable[Any]) -> None:
        """Do the outputs of a step in order: timers and failures here, the app's own
        through ``do``; nothing after a failure, or after the stream ended."""
        for out in outs:
            if self.closed():
                return
            match out:
                case Arm(name, delay):
                    self.timers.arm(name, delay)
                case Disarm(names):
                    self.timers.disarm(*names)
                case Fail():
                    await self.fail(out)
                    return
                case _ if not await self.do(out):
                    return
        if not self.closed():
            await self.performed()

    async def disconnect(self, code: int) -> None:
        """The client closed (or the instance ends): end the stream with its status."""
        if self.opened:
            await self.end_stream(self.disconnect_status, close_code=code)

    async def close_stream(
        self,
        code: int,
        status: TerminalStatus,
        *,
        error_code: str = "",
        reason: str | None = None,
    ) -> None:
        """End the stream, then close the socket with ``code``: the lease goes back now,
        not at the disconnect."""
        await self.end_stream(status, error_code=error_code, close_code=code)
        await self.close(code=code, reason=reason)

    async def end_stream(
        self, status: TerminalStatus, *, error_code: str = "", close_code: int | None
    ) -> None:
        """The one teardown, once, on every exit path: gauge, timers, tick, the usage
        record(s), the worker job, the admission. Each step runs even when an earlier one
        failed (issue 9)."""
        if self.released:
            return
        self.released = True
        await self.release_each(
            self.count_closed,
            self.stop_timers,
            self.ticker.stop,
            *self.record_steps(status, error_code, close_code),
            self.release_link,
            self.release_admission,  # after the record, as accounts.metering says
        )

    async def stop_timers(self) -> None:
        """Stop the consumer's own timers and mark the stream ended."""
        self.timers.disarm_all()
        self.mark_closed()

    async def release_link(self) -> None:
        """Stop the worker job now, also one whose acceptance is still on its way
        (``WorkerLink.close`` cancels it at the worker that accepts it; tts Z2, Q4)."""
        if self.link is not None:
            await self.link.close()

    async def gpu_job_accepted(self, message: dict[str, Any]) -> None:
        """Handle gpu.job.accepted: the job is pinned to that worker."""
        await self._link_reply(message)

    async def gpu_job_busy(self, message: dict[str, Any]) -> None:
        """Handle gpu.job.busy: the link retries until the admission wait runs out."""
        await self._link_reply(message)

    async def gpu_job_not_ready(self, message: dict[str, Any]) -> None:
        """Handle gpu.job.not_ready: the link retries until the answer time runs out."""
        await self._link_reply(message)

    async def gpu_job_heartbeat(self, message: dict[str, Any]) -> None:
        """Handle gpu.job.heartbeat: the pinned worker is alive."""
        if self.link is not None:
            self.link.touch(message)

    async def timer_fire(self, message: dict[str, Any]) -> None:
        """Handle timer.fire: a link timer or one of the consumer's own."""
        if self.closed():
            return
        if message.get("link") and self.link is not None:
            await self.on_outcome(await self.link.on_timer(message))
        elif message.get("link"):
            return
        elif message["name"] == TICK:
            self.ticker.ticked()
            stop = await self.tick_usage()  # accounts E6, E7: a stop ends the stream
            if stop is not None:
                await self.fail(stop)
        else:
            await self.on_timer(message["name"])

    def post_later(self, delay: float, name: str) -> asyncio.Task[None]:
        """Post ``timer.fire`` named ``name`` to this consumer's own channel after ``delay``."""

        async def post() -> None:
            await asyncio.sleep(delay)
            try:
                await self.channel_layer.send(
                    self.channel_name, {"type": TIMER, "name": name}
                )
            except Exception:  # boundary: one timer; an outage ends the stream anyway
                log_failure(
                    logger, "%s stream: timer %s not posted", self.endpoint, name
                )

        return asyncio.create_task(post())

    async def post_now(self, name: str) -> bool:
        """Post ``timer.fire`` named ``name`` to this consumer's own channel now."""
        try:
            await self.channel_layer.send(
                self.channel_name, {"type": TIMER, "name": name}
            )
        except ChannelFull:
            return False
        except Exception:  # boundary: one tick; an outage ends the stream anyway
            log_failure(logger, "%s stream: timer %s not posted", self.endpoint, name)
            return False
        return True

    def new_link(
        self, *, kind: Any, answer_ms: int, wait_ms: int, stall_s: float
    ) -> WorkerLink:
        """A fresh worker link replying to this consumer's channel."""
        self.link = WorkerLink(
            layer=self.channel_layer,
            own_channel=self.channel_name,
            kind=kind,
            answer_ms=answer_ms,
            wait_ms=wait_ms,
            stall_s=stall_s,
        )
        return self.link

    async def _link_reply(self, message: dict[str, Any]) -> None:
        if self.link is None:
            return
        # A closed consumer still passes replies on: the link cancels a late acceptance.
        outcome = await self.link.on_reply(message)
        if not self.closed():
            await self.on_outcome(outcome)
