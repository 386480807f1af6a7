"""Browser origins as stored on a key and compared at the socket (accounts S13)."""

from __future__ import annotations

import re

# Browsers omit these ports from Origin; stored entries omit them too (accounts S13).
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
# In a principal's allowed origins: every origin (a client secret of a key that lists
# none, accounts.auth); never a stored entry, which normalize_origin would refuse.
ANY_ORIGIN = "*"
_ORIGIN_RE = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.-]*)://"
    r"(?P<host>\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)"
    r"(?::(?P<port>[0-9]{1,5}))?"
)


def normalize_origin(value: str) -> str | None:
    """Return ``scheme://host[:port]`` lowercased without a default port, or None."""
    match = _ORIGIN_RE.fullmatch(value.strip().lower())
    if match is None:
        return None
    scheme, host, port = match["scheme"], match["host"], match["port"]
    if port is None or int(port) == DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{host}"
    if not 0 < int(port) <= 65535:
        return None
    return f"{scheme}://{host}:{int(port)}"
