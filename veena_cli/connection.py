"""Where the server is and how to reach it: URLs, the key, TLS, and handshake failures.

``--url`` is the server's base address (``http://127.0.0.1:8000``; ``https://`` for TLS; ``ws``
and ``wss`` work too). The key travels only in the ``Authorization`` header and appears in no
message this module builds.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import (
    ConnectionClosed,
    InvalidHandshake,
    InvalidMessage,
    InvalidStatus,
    InvalidURI,
)

from veena_cli.errors import (
    EXIT_AUTH,
    EXIT_CONNECTION,
    EXIT_USAGE,
    CliError,
    ConnectionLost,
)

DEFAULT_URL = "http://127.0.0.1:8000"
SCHEMES = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}
OPEN_TIMEOUT_S = 15
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
RETRY_STATUSES = (502, 503, 504)  # a proxy in front of a restarting server


@dataclass(frozen=True)
class Server:
    """A server's base URL, the key (kept out of ``repr``) and an optional CA file."""

    base: str
    key: str = field(repr=False)
    cafile: str | None = None

    @classmethod
    def from_options(
        cls, url: str | None, key: str | None, cafile: str | None
    ) -> Server:
        """Resolve ``--url`` / ``VEENA_URL`` and ``--key`` / ``VEENA_API_KEY``."""
        base = url or os.environ.get("VEENA_URL") or DEFAULT_URL
        parts = urlsplit(base)
        if parts.scheme not in SCHEMES or not parts.netloc:
            raise CliError(
                "--url must look like http://host:port or https://host:port", EXIT_USAGE
            )
        if parts.query:
            raise CliError("--url must not carry a query; use --key", EXIT_USAGE)
        key = key or os.environ.get("VEENA_API_KEY", "")
        if not key.strip():
            raise CliError("no API key: pass --key or set VEENA_API_KEY", EXIT_AUTH)
        path = parts.path.rstrip("/").removesuffix("/v1")
        base = urlunsplit((parts.scheme, parts.netloc, path, "", ""))
        return cls(base=base, key=key.strip(), cafile=cafile)

    def ws_url(self, path: str, query: str = "") -> str:
        """The WebSocket URL of ``path`` (``/v1/tts/ws``) on this server."""
        parts = urlsplit(self.base)
        return urlunsplit(
            (SCHEMES[parts.scheme], parts.netloc, parts.path + path, query, "")
        )

    @property
    def where(self) -> str:
        """The server as shown in messages (no credentials)."""
        parts = urlsplit(self.base)
        return f"{parts.scheme}://{parts.hostname}:{parts.port or ''}".rstrip(":")

    def ssl_context(self) -> ssl.SSLContext | None:
        """A verifying TLS context for ``wss`` (``--cacert`` added to the system CAs)."""
        if SCHEMES[urlsplit(self.base).scheme] != "wss":
            return None
        context = ssl.create_default_context()
        if self.cafile:
            try:
                context.load_verify_locations(cafile=self.cafile)
            except (OSError, ssl.SSLError):
                raise CliError(
                    f"cannot read the CA file {self.cafile}", EXIT_USAGE
                ) from None
        return context


@asynccontextmanager
async def open_socket(
    server: Server, path: str, *, query: str = "", subprotocols: list[str] | None = None
) -> AsyncIterator[ClientConnection]:
    """Connect to ``path``; every handshake failure becomes one clear CliError."""
    url = server.ws_url(path, query)
    try:
        socket = await connect(
            url,
            additional_headers={"Authorization": f"Bearer {server.key}"},
            subprotocols=subprotocols,  # type: ignore[arg-type]
            ssl=server.ssl_context(),
            open_timeout=OPEN_TIMEOUT_S,
            max_size=MAX_MESSAGE_BYTES,
            user_agent_header="veena-cli",
        )
    except InvalidStatus as exc:
        status = exc.response.status_code
        hint = " (wrong --url?)" if status in (404, 500) else ""
        raise CliError(
            f"{server.where}{path} answered HTTP {status}{hint}",
            EXIT_CONNECTION,
            retry=status in RETRY_STATUSES,
        ) from None
    except InvalidURI:
        raise CliError(f"invalid server URL {server.where}", EXIT_USAGE) from None
    except ssl.SSLCertVerificationError as exc:
        raise CliError(
            f"TLS certificate of {server.where} not trusted ({exc.verify_message}); "
            "pass --cacert FILE",
            EXIT_CONNECTION,
        ) from None
    except ssl.SSLError as exc:
        raise CliError(
            f"TLS handshake with {server.where} failed ({exc.reason}); "
            "is it an https server?",
            EXIT_CONNECTION,
        ) from None
    except (OSError, TimeoutError, InvalidHandshake) as exc:
        hint = describe_os_error(exc)
        if isinstance(exc, TimeoutError) and server.ssl_context() is not None:
            hint += ": an http server? then use http://"
        raise CliError(
            f"cannot connect to {server.where} ({hint})", EXIT_CONNECTION, retry=True
        ) from None
    try:
        yield socket
    finally:
        await socket.close()


def describe_os_error(exc: BaseException) -> str:
    """A short description of a network failure, without a traceback."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused: is the server running?"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, InvalidMessage):
        return "no valid HTTP answer: an https server? then use https://"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return type(exc).__name__


def lost(exc: ConnectionClosed) -> ConnectionLost:
    """A closed connection as ConnectionLost, with the server's close code if it sent one."""
    close = exc.rcvd
    return ConnectionLost(close.code if close else None, close.reason if close else "")


@asynccontextmanager
async def receiving(seconds: float, silence: str) -> AsyncIterator[None]:
    """Read from a socket within ``seconds``: a close is ``lost``, the time running out is
    ConnectionLost with no close frame and ``silence`` as its reason."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except ConnectionClosed as exc:
        raise lost(exc) from None
    except TimeoutError:
        raise ConnectionLost(None, silence) from None
