"""HTTP(S) requests that reach public addresses only, checked where the socket connects.

A webhook's URL is the account's, so its host may resolve to the gateway's own network
(loopback, private, link-local: ``169.254.169.254``). Checking the name before the request and
letting the HTTP client resolve it again is open to DNS rebinding: a name whose first answer is
public and second is ``127.0.0.1``. Here the connection itself resolves the name once, refuses
it unless every address is public (``WEBHOOK_ALLOW_PRIVATE_ADDRESSES`` lifts that), and
connects to those addresses, before any byte (a TLS hello included) is sent. Redirects are not
followed: urllib would resend a POST as a GET, to a host nobody checked.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import urllib.request
from typing import Any

from django.conf import settings


class NotConnected(OSError):
    """A host that is not connected to; its text says why, for the attempt's record."""


ADDRESS_NOT_ALLOWED = "address not allowed"
HOST_NOT_FOUND = "host not found"


def public_addresses(host: str, port: int) -> list[tuple[Any, ...]]:
    """``getaddrinfo``'s stream addresses of ``host``; NotConnected when it does not resolve
    or an address is not public (unless private ones are allowed)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise NotConnected(HOST_NOT_FOUND) from exc
    ips = {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found}
    if not ips or not (
        settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES or all(ip.is_global for ip in ips)
    ):
        raise NotConnected(ADDRESS_NOT_ALLOWED)
    return found


def _connect(
    address: tuple[str, int],
    timeout: Any = socket._GLOBAL_DEFAULT_TIMEOUT,  # type: ignore[attr-defined]
    source_address: tuple[str, int] | None = None,
    **kwargs: Any,
) -> socket.socket:
    """``socket.create_connection`` to the checked addresses of ``address``'s host."""
    host, port = address
    failure: OSError | None = None
    for family, kind, proto, _name, sockaddr in public_addresses(host, port):
        sock = socket.socket(family, kind, proto)
        try:
            if timeout is not socket._GLOBAL_DEFAULT_TIMEOUT:  # type: ignore[attr-defined]
                sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            failure = exc
    raise failure or OSError(f"cannot connect to {host}")


class _HTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = _connect


class _HTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = _connect  # before the TLS handshake, by ``connect``


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_HTTPConnection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_HTTPSConnection, req, context=self._context)  # type: ignore[attr-defined]


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not a delivery."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


public_opener = urllib.request.build_opener(
    _HTTPHandler(), _HTTPSHandler(), _NoRedirects()
)
