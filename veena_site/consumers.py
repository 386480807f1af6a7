"""Base of both API consumers: JSON output, self-posted timers and worker-link replies."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from channels.exceptions import ChannelFull
from channels.generic.websocket import AsyncWebsocketConsumer

from veena_site import lifecycle
from veena_site.jobclient import TIMER, Outcome, WorkerLink


class WorkerClientConsumer(AsyncWebsocketConsumer):
    """A WebSocket consumer that runs one worker job through a ``WorkerLink`` at a time."""

    link: WorkerLink | None = None

    async def on_outcome(self, outcome: Outcome | None) -> None:
        """React to an admission or liveness decision of the link."""
        raise NotImplementedError

    async def on_timer(self, name: str) -> None:
        """React to a timer of the consumer's own (not the link's)."""
        raise NotImplementedError

    def closed(self) -> bool:
        """True once the consumer has ended its stream."""
        raise NotImplementedError

    async def on_shutdown(self) -> None:
        """The gateway is stopping: end the stream with 1001 (consumers may drain first)."""
        await self.close(code=1001)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Run the consumer; however it ends (a crash included), its worker job ends too."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self.link is not None:
                self.link.abandon()

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
        """Send one JSON text message."""
        await self.send(text_data=json.dumps(event, ensure_ascii=False))

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
