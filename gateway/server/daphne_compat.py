"""Let Daphne send the close codes and reasons our specs require, and tell a consumer how
much of what it sent still waits in the socket's write buffer.

Daphne closes a socket through autobahn's ``sendClose``, which accepts only 1000 and
3000–4999 from applications and raises on 1008, 1009, 1011 and 1013; Daphne also drops the
ASGI close ``reason``. The specs (tts-ws §6, realtime LM-7) need those codes on the wire and
the realtime close reason to be the error code, so after ``accept`` a close is sent as
autobahn's own close frame with the code and a reason truncated to 123 bytes. A close before
``accept`` keeps Daphne's behaviour (an HTTP 403), which our consumers never use (W5, CN-4).

ASGI gives an application no way to fail a response whose headers are out: a streamed body
that ends early ends like a whole one, and the client takes the truncated audio for all of
it. Each HTTP scope therefore carries ``scope["extensions"]["veena.abort"]``, a callable that
aborts the connection, so the client sees the body cut (issue 31).

ASGI gives an application no backpressure: ``send`` returns once Twisted has the bytes, and a
client that stops reading makes them pile up in the transport. Each WebSocket scope therefore
carries ``scope["extensions"]["veena.transport"]``, a ``TransportProbe`` whose ``buffered()``
is the bytes Twisted has not written to the socket yet; the TTS consumer acknowledges worker
audio only while it is small (issue 9). Without Daphne (tests) the extension is absent.

Daphne cancels an application instance that has not ended ``application_close_timeout`` after
its client left, with a warning that names only the instance's outermost coroutine. The warning
here also names every coroutine on the instance's await chain (``awaiting``), so the log says
where a consumer hung.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

logger = logging.getLogger(__name__)

REASON_MAX_BYTES = 123
TRANSPORT_EXTENSION = "veena.transport"
ABORT_EXTENSION = "veena.abort"


def abort_handle(request: Any) -> Any:
    """A callable that aborts ``request``'s connection (nothing more reaches the client)."""

    def abort() -> None:
        channel = getattr(request, "channel", None)
        if channel is not None and channel.transport is not None:
            channel.transport.abortConnection()

    return abort


class TransportProbe:
    """How many bytes of one connection wait in Twisted's write buffers."""

    def __init__(self, protocol: Any) -> None:
        self._protocol = protocol

    def buffered(self) -> int:
        """Bytes written by the application that the kernel has not taken yet."""
        transport = getattr(self._protocol, "transport", None)
        total = 0
        for _ in range(3):  # TCP, or TLS over TCP
            if transport is None:
                break
            data = getattr(transport, "dataBuffer", b"")
            total += len(data) - int(getattr(transport, "offset", 0))
            total += int(getattr(transport, "_tempDataLen", 0))
            transport = getattr(transport, "transport", None)
        return max(0, total)


def awaiting(task: asyncio.Future[Any]) -> list[str]:
    """``file:line function`` of each coroutine on ``task``'s await chain, outermost first,
    then the type of what the innermost one awaits (a future: ``FutureIter``)."""
    chain: list[str] = []
    step: Any = getattr(task, "get_coro", lambda: None)()
    while step is not None and len(chain) < 64:
        frame = getattr(step, "cr_frame", None) or getattr(step, "gi_frame", None)
        if frame is None:
            chain.append(type(step).__name__)
            break
        chain.append(
            f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}"
        )
        step = getattr(step, "cr_await", None) or getattr(step, "gi_yieldfrom", None)
    return chain


def _name_hung(server: Any) -> None:
    """Log the await chain of each instance Daphne is about to cancel for not ending."""
    for protocol, details in list(server.connections.items()):
        disconnected = details.get("disconnected")
        instance = details.get("application_instance")
        if (
            disconnected
            and time.time() - disconnected > server.application_close_timeout
            and instance is not None
            and not instance.done()
        ):
            logger.warning(
                "application for %r still running %.0f s after its client left; awaiting:\n  %s",
                protocol,
                time.time() - disconnected,
                "\n  ".join(awaiting(instance)),
            )


def install() -> None:
    """Patch Daphne's WebSocket close and application creation once per process."""
    from daphne.server import Server
    from daphne.ws_protocol import WebSocketProtocol

    if getattr(WebSocketProtocol, "_veena_close_codes", False):
        return
    original = WebSocketProtocol.handle_reply

    def handle_reply(self: Any, message: dict[str, Any]) -> None:
        if (
            message.get("type") == "websocket.close"
            and self.state != self.STATE_CONNECTING
        ):
            reason = (message.get("reason") or "").encode()[:REASON_MAX_BYTES] or None
            code = message.get("code") or 1000
            self.sendCloseFrame(code=code, reasonUtf8=reason, isReply=False)
            return
        original(self, message)

    create_application = Server.create_application

    def with_probe(self: Any, protocol: Any, scope: dict[str, Any]) -> Any:
        if scope.get("type") == "websocket":
            extensions = scope.setdefault("extensions", {})
            extensions[TRANSPORT_EXTENSION] = TransportProbe(protocol)
        elif scope.get("type") == "http":
            extensions = scope.setdefault("extensions", {})
            extensions[ABORT_EXTENSION] = abort_handle(protocol)
        return create_application(self, protocol, scope)

    application_checker = Server.application_checker

    def naming_hung(self: Any) -> None:
        _name_hung(self)
        application_checker(self)

    WebSocketProtocol.handle_reply = handle_reply
    Server.create_application = with_probe
    Server.application_checker = naming_hung
    WebSocketProtocol._veena_close_codes = True
