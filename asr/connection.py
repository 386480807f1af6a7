"""What a ``/v1/realtime`` connection starts with: its session, models and lifetime.

Read from the scope (query string, headers, subprotocols) and the settings (CN-2, CN-6, CN-8,
DI-1, SE-15); the consumer calls these once per connection (and ``served_models`` per event,
since a failover may pin another worker's model version).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from django.conf import settings

from accounts.admission import Admission
from asr.config import Models, SessionConfig, default_config
from asr.protocol import Dialect
from asr.session import RealtimeSession
from asr.updates import validate_update
from asr.whisper import MODEL_RATE

SUBPROTOCOLS = ("realtime", "openai-beta.realtime-v1")  # CN-3, in preference order


def subprotocol(scope: dict[str, Any]) -> str | None:
    """The subprotocol to accept: the first of ours the client offered (CN-3)."""
    offered = scope.get("subprotocols") or []
    return next((p for p in SUBPROTOCOLS if p in offered), None)


def served_models(model_version: str) -> Models:
    """The served model, its aliases and whether it is English-only (SE-15, row 8)."""
    return Models(
        served=settings.ASR_MODEL,
        aliases=tuple(settings.ASR_MODEL_ALIASES),
        english_only=settings.ASR_MODEL.endswith(".en")
        or model_version.endswith(".en"),
        max_prompt_chars=settings.ASR_MAX_PROMPT_CHARS,
    )


def new_session(scope: dict[str, Any], *, accepted_at: float) -> RealtimeSession:
    """Session state from the query string, headers and settings (CN-2, CN-6, DI-1)."""
    query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
    dialect = (query.get("dialect") or [settings.ASR_DIALECT])[-1]
    fixed = {"openai": Dialect.OPENAI, "vllm": Dialect.VLLM}.get(dialect)
    if fixed is None and settings.ASR_DIALECT in ("openai", "vllm"):
        fixed = Dialect(settings.ASR_DIALECT)
    headers = dict(scope.get("headers") or [])
    beta = b"realtime=v1" in headers.get(b"openai-beta", b"") or (
        "openai-beta.realtime-v1" in (scope.get("subprotocols") or [])
    )
    config = default_config(
        served_models(""),
        query_model=query["model"][-1] if query.get("model") else None,
        turn=settings.ASR_DEFAULT_TURN_DETECTION,
        vllm=fixed is Dialect.VLLM,
    )
    return RealtimeSession(
        config=config,
        dialect=fixed or Dialect.UNDETERMINED,
        beta=beta and fixed is not Dialect.VLLM,
        precommit_deltas=settings.ASR_PRECOMMIT_DELTAS,
        max_samples=int(settings.ASR_MAX_BUFFER_S * MODEL_RATE),
        max_pending_samples=int(settings.ASR_MAX_PENDING_S * MODEL_RATE),
        created_at=accepted_at,
    )


def secret_config(session: Any) -> SessionConfig:
    """What a realtime client secret's ``session`` makes of a new session's defaults
    (issue 35): validated as a GA ``session.update``; raises ``ConfigError``."""
    base = default_config(
        served_models(""),
        query_model=None,
        turn=settings.ASR_DEFAULT_TURN_DETECTION,
        vllm=False,
    )
    return (
        base if session is None else validate_update(session, base, served_models(""))
    )


def apply_secret_session(session: RealtimeSession, admission: Admission | None) -> None:
    """A client secret's session configuration, applied before ``session.created`` as
    the client's first ``session.update`` would be; raises ``ConfigError``."""
    secret = admission.principal.secret_session if admission is not None else None
    if secret:
        config = validate_update(secret, session.config, served_models(""))
        session.configure(config)


def expires_at(accepted_at: float, admission: Admission | None) -> int:
    """CN-8: accept time plus the shorter of the setting and the plan's limit."""
    limit = settings.ASR_MAX_SESSION_S
    if admission is not None:
        limit = min(limit, admission.principal.max_session_seconds or limit)
    return int(accepted_at + limit)


def expiry_reason(admission: Admission | None) -> str:
    """LM-4: the plan's maximum duration is accounts' E7 stop, else the wire code."""
    plan = admission.principal.max_session_seconds if admission else None
    if plan is not None and plan <= settings.ASR_MAX_SESSION_S:
        return "max_session_duration"
    return "session_expired"


@dataclass
class EarlyFrames:
    """Frames received during admission, handled after session.created (bounded)."""

    limit: int  # ASR_MAX_EARLY_BYTES
    frames: list[tuple[str | None, bytes | None]] = field(default_factory=list)
    size: int = 0

    def hold(self, text: str | None, data: bytes | None) -> bool:
        """Keep a frame; False (and nothing kept) once they pass the limit."""
        self.frames.append((text, data))
        self.size += len(text or data or "")
        if self.size > self.limit:
            self.frames.clear()
            return False
        return True

    def take(self) -> list[tuple[str | None, bytes | None]]:
        """The frames held so far, oldest first; none are held after."""
        frames, self.frames = self.frames, []
        return frames
