"""Base of both API consumers: the exception boundary, JSON output, self-posted timers and
worker-link replies.

``dispatch`` is the one boundary of a stream (issue 9): whatever a handler raises (receive,
``gpu.*``, ``timer.*``, connect or disconnect), the exception is logged once, the protocol's
internal error goes out where the socket still allows it, the consumer's release runs (worker
job, usage record as ``failed`` / ``internal_error``, lease, gauges) and the socket closes 1011.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from channels.exceptions import ChannelFull, StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer

from gateway import jsontext, lifecycle, metrics
from gateway.dispatch import dispatch
from gateway.jobclient import TIMER, Outcome, WorkerLink

logger = logging.getLogger(__name__)

CRASH_CLOSE_CODE = 1011
ReleaseStep = Callable[[], Awaitable[object]]


class WorkerClientConsumer(AsyncWebsocketConsumer):
    """A WebSocket consumer that runs one worker job through a ``WorkerLink`` at a time."""

    endpoint: ClassVar[str] = ""  # the metrics label: "tts" or "asr"
    link: WorkerLink | None = None
    accepted = False
    counted = False  # counted in veena_active_streams
    crashed = False

    async def on_outcome(self, outcome: Outcome | None) -> None:
        """React to an admission or liveness decision of the link."""
        raise NotImplementedError

    async def on_timer(self, name: str) -> None:
        """React to a timer of the consumer's own (not the link's)."""
        raise NotImplementedError

    def closed(self) -> bool:
        """True once the consumer has ended its stream."""
        raise NotImplementedError

    async def send_internal_error(self) -> None:
        """Send the protocol's internal error event (the boundary's first step)."""
        raise NotImplementedError

    async def release_failed(self) -> None:
        """Release everything as a failure: usage ``failed`` / ``internal_error``, 1011."""
        raise NotImplementedError

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Run the consumer; however it ends (a crash, Daphne's close timeout, a test's
        communicator cancelling it), it releases everything it holds, shielded, once, and
        its worker job ends too."""
        try:
            await super().__call__(scope, receive, send)
        except Exception:
            # Outside dispatch (the channel layer's receive): Daphne answers with close
            # 1011 (daphne ws_protocol handle_exception), so the record says 1011 and
            # failed, not a client's 1006 (docs/accounting.md: the code really sent).
            logger.exception(
                "%s stream: consumer failed outside a handler", self.endpoint
            )
            await asyncio.shield(self.crash())
            raise
        finally:
            await asyncio.shield(self.release_on_exit())
            if self.link is not None:
                self.link.abandon()

    async def release_on_exit(self) -> None:
        """The last exit path: a disconnect that never ran (or was cut short) runs now."""
        if hasattr(self, "channel_name"):
            lifecycle.unregister(self.channel_name)
        try:
            await self.disconnect(1006)  # abnormal closure; a no-op once released
        except Exception:  # boundary: the instance is ending
            logger.exception("%s stream: release on exit failed", self.endpoint)

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Run the message's handler (``gateway.dispatch``: no database hop); anything it
        raises ends the stream here, once."""
        try:
            await dispatch(self, message)
        except StopConsumer:
            raise
        except Exception:  # boundary: one stream (STYLE 46)
            logger.exception(
                "%s stream: %s handler failed", self.endpoint, message.get("type")
            )
            await self.crash()
            if message.get("type") == "websocket.disconnect":
                raise StopConsumer() from None

    async def crash(self) -> None:
        """The boundary's way out: internal error, release as failed, close 1011."""
        if self.crashed:
            return
        self.crashed = True
        metrics.ERRORS.labels(self.endpoint, "internal_error").inc()
        if self.accepted and not self.closed():
            await self.release_each(self.send_internal_error)
        await self.release_each(
            self.release_failed, lambda: self.close(code=CRASH_CLOSE_CODE)
        )

    async def release_each(self, *steps: ReleaseStep) -> None:
        """Run each release step in order; a failing step is logged, the rest still run."""
        for step in steps:
            try:
                await step()
            except Exception:  # boundary: one release step
                logger.exception("%s stream: a release step failed", self.endpoint)

    async def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        """Accept the socket (the boundary may send an error only after this)."""
        await super().accept(subprotocol, headers)
        self.accepted = True

    def count_open(self) -> None:
        """The stream counts in ``veena_active_streams`` until ``count_closed``."""
        if not self.counted:
            self.counted = True
            metrics.ACTIVE_STREAMS.labels(self.endpoint).inc()

    async def count_closed(self) -> None:
        """The stream no longer counts in ``veena_active_streams`` (idempotent)."""
        if self.counted:
            self.counted = False
            metrics.ACTIVE_STREAMS.labels(self.endpoint).dec()

    async def on_shutdown(self) -> None:
        """The gateway is stopping: end the stream with 1001 (consumers may drain first)."""
        await self.close(code=1001)

    async def websocket_connect(self, message: dict[str, Any]) -> None:
        """Register the socket for the shutdown drain; refuse new ones while stopping."""
        lifecycle.register(self.channel_name)
        if lifecycle.shutting_down():
            await self.accept()
            await self.close(code=1001)
            return
        await super().websocket_connect(message)

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        """Unregister from the shutdown drain, then run the normal disconnect."""
        lifecycle.unregister(self.channel_name)
        await super().websocket_disconnect(message)

    async def gateway_shutdown(self, message: dict[str, Any]) -> None:
        """Handle gateway.shutdown from this process's drain."""
        if not self.closed():
            await self.on_shutdown()

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
        elif not message.get("link"):
            await self.on_timer(message["name"])

    async def send_json(self, event: dict[str, Any]) -> None:
        """Send one JSON text message; the one text send path, always valid UTF-8."""
        await self.send(text_data=jsontext.dumps(event))

    def post_later(self, delay: float, name: str) -> asyncio.Task[None]:
        """Post ``timer.fire`` named ``name`` to this consumer's own channel after ``delay``."""

        async def post() -> None:
            await asyncio.sleep(delay)
            await self.channel_layer.send(
                self.channel_name, {"type": TIMER, "name": name}
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
