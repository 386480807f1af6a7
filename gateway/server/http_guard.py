"""Slow and oversized HTTP requests stopped in Twisted, before Daphne or Django see them.

Daphne runs on Twisted's ``HTTPChannel``, which gives a client 60 s of silence between any two
bytes and no limit on the time its headers take (a slowloris client holds a connection open
for ever, one byte a minute), and reads a request's whole body into memory or a temporary
file before Daphne hands it to the application; Django's ASGI handler reads it again, so a
view's own size check came after the upload had been received whole. Installed by
``rungateway`` (issue 31):

* **Header timeout**: a connection must deliver a request's complete headers within
  ``header_timeout_s`` of opening, and of its previous response ending (keep-alive); else it
  is aborted. A WebSocket handshake is such a request, so it is covered too; once upgraded,
  Daphne's handshake and connect timeouts apply.
* **Body limit**: ``body_limit(path)`` bytes. A ``Content-Length`` above it is answered 413
  as soon as the headers are in, nothing of the body read; a chunked body is counted as it
  arrives and answered 413 the moment it passes the limit. Either way the connection closes
  and nothing more is read from it.

HTTP/2 (negotiated only over TLS, when the ``h2`` package is present) is not covered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from gateway.wording import count

logger = logging.getLogger(__name__)

BodyLimit = Callable[[str], int]
TooLarge = Callable[[str, int], bytes]  # (path, limit) → the 413's JSON body


def install(
    *, header_timeout_s: float, body_limit: BodyLimit, too_large: TooLarge
) -> None:
    """Guard every HTTP/1.1 connection of this process (idempotent)."""
    from daphne.http_protocol import WebRequest
    from twisted.web import http

    HTTPChannel: Any = http.HTTPChannel

    if getattr(HTTPChannel, "_veena_guarded", False):
        return
    made, headers = HTTPChannel.connectionMade, HTTPChannel.allHeadersReceived
    done, lost = HTTPChannel.requestDone, HTTPChannel.connectionLost
    chunk = WebRequest.handleContentChunk

    def connection_made(self: Any) -> None:
        made(self)
        _arm(self, header_timeout_s)

    def all_headers_received(self: Any) -> None:
        _disarm(self)
        path = bytes(self._path).split(b"?", 1)[0].decode("latin-1")
        limit = body_limit(path)
        if self.length is not None and self.length > limit:
            _refuse(
                self, too_large(path, limit), f"{count(self.length, 'byte')} declared"
            )
            return
        request = self.requests[-1]
        request._veena_limit, request._veena_path = limit, path
        headers(self)

    def request_done(self: Any, request: Any) -> None:
        done(self, request)
        if self.persistent:
            _arm(self, header_timeout_s)  # the next request's headers

    def connection_lost(self: Any, reason: Any) -> None:
        _disarm(self)
        lost(self, reason)

    def handle_content_chunk(self: Any, data: bytes) -> None:
        self._veena_received = getattr(self, "_veena_received", 0) + len(data)
        limit = getattr(self, "_veena_limit", None)
        if limit is not None and self._veena_received > limit:
            body = too_large(self._veena_path, limit)
            _refuse(self.channel, body, f"over {count(limit, 'byte')} received")
            return
        chunk(self, data)

    HTTPChannel.connectionMade = connection_made
    HTTPChannel.allHeadersReceived = all_headers_received
    HTTPChannel.requestDone = request_done
    HTTPChannel.connectionLost = connection_lost
    WebRequest.handleContentChunk = handle_content_chunk  # type: ignore[method-assign]
    HTTPChannel._veena_guarded = True


def _arm(channel: Any, timeout_s: float) -> None:
    from twisted.internet import reactor

    _disarm(channel)
    clock: Any = reactor
    channel._veena_header_timer = clock.callLater(timeout_s, _expire, channel)


def _disarm(channel: Any) -> None:
    timer = getattr(channel, "_veena_header_timer", None)
    channel._veena_header_timer = None
    if timer is not None and timer.active():
        timer.cancel()


def _expire(channel: Any) -> None:
    channel._veena_header_timer = None
    logger.info("http connection dropped: no complete request headers in time")
    channel.transport.abortConnection()


def _refuse(channel: Any, body: bytes, why: str) -> None:
    """Answer 413 on the raw transport, read nothing more, close."""
    if getattr(channel, "_veena_refused", False):
        return
    channel._veena_refused = True
    logger.info("http request refused (413): %s", why)
    head = (
        "HTTP/1.1 413 Payload Too Large\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode("latin-1")
    channel.transport.write(head + body)

    def ignore(*args: Any) -> None:
        return None

    # The body still on its way (this packet's rest included) is dropped, unread.
    channel.dataReceived = channel.rawDataReceived = channel.lineReceived = ignore
    channel.transport.loseConnection()
