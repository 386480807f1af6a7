"""Admission at connect (accounts E1): the one entry point ``tts`` and ``asr`` call.

The pipeline is authenticate → origin → concurrency lease → requests per minute → quota. This
module runs the first two steps; the lease, RPM and quota steps, and what ``release()`` gives
back, come with the limits work (accounts §5.2–§5.5).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from accounts.auth import KeyPrincipal, Scope, authenticate_websocket
from accounts.exceptions import AdmissionDenied
from accounts.models import normalize_origin


@dataclass
class Admission:
    """What a stream holds while it is open; ``release()`` gives it back once."""

    principal: KeyPrincipal
    stream_id: uuid.UUID = field(default_factory=uuid.uuid4)
    released: bool = field(default=False, init=False)

    async def release(self) -> None:
        """Give back what admission took; calling it again does nothing (E5)."""
        if self.released:
            return
        self.released = True


def scope_origin(scope: Scope) -> str | None:
    """The raw ``Origin`` header of a scope, or None when the client sent none."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"origin":
            return str(value.decode("latin-1"))
    return None


def check_origin(principal: KeyPrincipal, origin: str | None) -> None:
    """S13: without Origin, pass; with one, it must equal an allowed origin."""
    if origin is None:
        return
    normalized = normalize_origin(origin)
    if normalized is None or normalized not in principal.allowed_origins:
        raise AdmissionDenied("origin_not_allowed")


async def admit(
    scope: Scope, *, endpoint: str, stream_id: uuid.UUID | None = None
) -> Admission:
    """Admit one stream on ``endpoint`` or raise AdmissionDenied (E1)."""
    principal = await authenticate_websocket(scope, endpoint=endpoint)
    check_origin(principal, scope_origin(scope))
    return Admission(principal=principal, stream_id=stream_id or uuid.uuid4())
