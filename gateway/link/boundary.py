"""The exception boundary of a WebSocket stream: one place where whatever a handler raises ends
the stream, once.

``dispatch`` is the one boundary of a stream (issue 9): whatever a handler raises (receive,
``gpu.*``, ``timer.*``, connect or disconnect), the exception is logged once, the protocol's
error goes out where the socket still allows it, the consumer's release runs (worker job, usage
record as ``failed``, lease, gauges) and the socket closes. A bug is ``internal_error`` and
1011; an outage of Redis or the database (``gateway.outages``) is ``service_unavailable`` and
1013, logged without a traceback (issue 31).

The consumer's own channel is read inside that boundary too: Channels' ``AsyncConsumer``
awaits the layer's ``receive`` in ``await_many_dispatch``, where an error (Redis gone) escaped
the consumer and Daphne closed the socket 1011 with no error event. Here a failed receive
becomes one ``layer.outage`` message, dispatched like any other; later receives wait out the
outage quietly while the stream closes. The shutdown drain (``gateway.server.lifecycle``)
reaches the stream here as well.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, ClassVar

from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from channels.utils import await_many_dispatch

from gateway import jsontext, metrics
from gateway.dispatch import dispatch
from gateway.layers.listener import receive_through_outages
from gateway.outages import FAILURE_CLOSE_CODES, Failure, is_outage, log_failure
from gateway.server import lifecycle

logger = logging.getLogger(__name__)

OUTAGE = "layer.outage"  # what the own channel's receive returns when the layer fails
ReleaseStep = Callable[[], Awaitable[object]]


class StreamBoundary(AsyncWebsocketConsumer, abc.ABC):
    """A WebSocket consumer whose every handler runs inside one exception boundary."""

    endpoint: ClassVar[str] = ""  # the metrics label: "tts" or "asr"
    accepted = False
    counted = False  # counted in veena_active_streams
    crashed = False
    layer_failed = False  # the own channel's receive failed once (OUTAGE dispatched)

    @abc.abstractmethod
    def closed(self) -> bool:
        """True once the stream has ended (or before it began)."""

    @abc.abstractmethod
    async def send_failure(self, failure: Failure) -> None:
        """Send the protocol's error event for ``failure`` (the boundary's first step)."""

    @abc.abstractmethod
    async def release_failed(self, failure: Failure, close_code: int) -> None:
        """Release everything as a failure: usage ``failed`` with ``failure`` as its error
        code and ``close_code``."""

    @abc.abstractmethod
    def refusal(self, message: str) -> dict[str, Any]:
        """The protocol's service-unavailable error event for a socket refused at once."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Run the consumer; however it ends (a crash, Daphne's close timeout, a test's
        communicator cancelling it), it releases everything it holds, shielded, once, and
        its worker job ends too."""
        try:
            await self.serve(scope, receive, send)
        except Exception as error:
            # Outside dispatch (creating the own channel, say): the stream ends here as
            # inside, with the code it sends, before Daphne's own close; the record holds
            # that code, not a client's 1006 (docs/accounting.md: the code really sent).
            log_failure(logger, "%s stream: failed outside a handler", self.endpoint)
            await asyncio.shield(self.fail_for(error))
            raise
        finally:
            await asyncio.shield(self.release_on_exit())
            if self.link is not None:
                self.link.abandon()

    async def serve(self, scope: Any, receive: Any, send: Any) -> None:
        """``AsyncConsumer.__call__``, with the own channel read by ``receive_channel``."""
        self.scope = scope
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        self.channel_name = await self.channel_layer.new_channel()
        self.base_send = send
        try:
            await await_many_dispatch([receive, self.receive_channel], self.dispatch)
        except StopConsumer:
            pass

    async def receive_channel(self) -> dict[str, Any]:
        """The next message on the own channel; the first failure of the layer is one
        ``layer.outage`` message, after which receives wait for the layer to come back."""
        if self.layer_failed:
            return await receive_through_outages(self.channel_layer, self.channel_name)
        try:
            message: dict[str, Any] = await self.channel_layer.receive(
                self.channel_name
            )
        except asyncio.CancelledError:
            raise
        except Exception:  # boundary: the layer's receive; the stream's outage path
            log_failure(
                logger, "%s stream: channel layer receive failed", self.endpoint
            )
            self.layer_failed = True
            return {"type": OUTAGE}
        return message

    async def layer_outage(self, message: dict[str, Any]) -> None:
        """Handle layer.outage: the channel layer failed under this stream."""
        await self.fail_with("service_unavailable")

    async def release_on_exit(self) -> None:
        """The last exit path: a disconnect that never ran (or was cut short) runs now."""
        if hasattr(self, "channel_name"):
            lifecycle.unregister(self.channel_name)
        try:
            await self.disconnect(1006)  # abnormal closure; a no-op once released
        except Exception:  # boundary: the instance is ending
            log_failure(logger, "%s stream: release on exit failed", self.endpoint)

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Run the message's handler (``gateway.dispatch``: no database hop); anything it
        raises ends the stream here, once."""
        try:
            await dispatch(self, message)
        except StopConsumer:
            raise
        except Exception as error:  # boundary: one stream (STYLE 46)
            kind = message.get("type")
            log_failure(logger, "%s stream: %s handler failed", self.endpoint, kind)
            await self.fail_for(error)
            if kind == "websocket.disconnect":
                raise StopConsumer() from None

    async def fail_for(self, error: BaseException) -> None:
        """The boundary's way out for ``error``: an outage (``gateway.outages``) is
        ``service_unavailable`` and 1013, anything else ``internal_error`` and 1011."""
        outage = is_outage(error)
        await self.fail_with("service_unavailable" if outage else "internal_error")

    async def fail_with(self, failure: Failure) -> None:
        """The boundary's way out: the protocol's error for ``failure``, release as
        failed, close with its code (1011 for a bug, 1013 for an outage); once."""
        if self.crashed:
            return
        self.crashed = True
        close_code = FAILURE_CLOSE_CODES[failure]
        metrics.ERRORS.labels(self.endpoint, failure).inc()
        if self.accepted and not self.closed():
            await self.release_each(partial(self.send_failure, failure))
        await self.release_each(
            partial(self.release_failed, failure, close_code),
            partial(self.close, code=close_code),
        )

    async def release_each(self, *steps: ReleaseStep) -> None:
        """Run each release step in order; a failing step is logged, the rest still run."""
        for step in steps:
            try:
                await step()
            except Exception:  # boundary: one release step
                log_failure(logger, "%s stream: a release step failed", self.endpoint)

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
        """Register the socket for the shutdown drain; while stopping, refuse new ones
        with the protocol's service-unavailable error and 1013 (the client retries on
        another gateway)."""
        lifecycle.register(self.channel_name)
        if lifecycle.shutting_down():
            await self.accept()
            metrics.ERRORS.labels(self.endpoint, "service_unavailable").inc()
            await self.send_json(self.refusal(lifecycle.SHUTTING_DOWN))
            await self.close(code=FAILURE_CLOSE_CODES["service_unavailable"])
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

    async def send_json(self, event: dict[str, Any]) -> None:
        """Send one JSON text message; the one text send path, always valid UTF-8."""
        await self.send(text_data=jsontext.dumps(event))
