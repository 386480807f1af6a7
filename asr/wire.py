"""What the realtime consumer sends: session outputs as wire events and worker messages.

``RealtimeSender.perform`` turns the outputs of ``asr.session`` into the dialect's server events
(``asr.events``) and into ``asr.job.*`` messages for the pinned worker; the fixed error texts and
close codes of §3.4, §10 and §11 live here too.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

from django.conf import settings

from accounts.admission import Admission
from accounts.exceptions import DenialReason
from asr import protocol
from asr.config import beta_session_object, session_object
from asr.events import ClientOut, openai_events, vllm_events
from asr.items import (
    Completed,
    Drop,
    Forward,
    OpenItem,
    Out,
    Overflow,
    WorkerCommit,
)
from asr.messages import AsrAudio, AsrCommit, AsrDrop, AsrItemOpen
from asr.protocol import (
    MESSAGES,
    error_event,
    server_event,
    vllm_error,
)
from asr.session import (
    Dialect,
    RealtimeSession,
)
from asr.usage import RealtimeUsage, UsageStatus
from gateway import metrics
from gateway.consumers import WorkerClientConsumer
from gateway.contracts import Message
from gateway.timers import NamedTimers

logger = logging.getLogger(__name__)

DENIALS = {  # accounts E3 reason → (wire code, message) (AU-4, AU-6)
    "invalid_api_key": ("invalid_api_key", "Incorrect API key provided."),
    "origin_not_allowed": ("origin_not_allowed", "Origin not allowed for this key."),
    "endpoint_not_allowed": (
        "endpoint_not_allowed",
        "This key may not use the realtime endpoint.",
    ),
    "too_many_streams": (
        "too_many_sessions",
        "Too many concurrent realtime sessions. Retry after {s:.1f} s.",
    ),
    "rate_limited": (
        "rate_limit_exceeded",
        "Rate limit exceeded. Retry after {s:.1f} s.",
    ),
    "quota_exceeded": ("insufficient_quota", "You exceeded your current quota."),
    "limits_unavailable": ("service_unavailable", "Service temporarily unavailable."),
}
DEFAULT_RETRY_MS = 1000
PUMP_RETRY_S = 0.05  # ChannelFull: retry the worker queue after this
STOPS = {  # accounts E7 stop reason → wire code (LM-5)
    "key_revoked": "invalid_api_key",
    "max_session_duration": "session_expired",
    "lease_lost": "lease_lost",
    "quota_exceeded": "insufficient_quota",
    "usage_unavailable": "usage_unavailable",
    "limits_unavailable": "service_unavailable",
}


def message(code: str, **values: Any) -> str:
    """The fixed message of ``code`` (ER-3), with settings filled in."""
    template = MESSAGES.get(code) or MESSAGES["internal_error"]
    values.setdefault("cap", settings.ASR_MAX_BUFFER_S)
    values.setdefault("limit", settings.ASR_MAX_MESSAGE_BYTES)
    values.setdefault("s", int(settings.ASR_IDLE_TIMEOUT_S))
    values.setdefault("pending", settings.ASR_MAX_PENDING_S)
    if code == "too_many_sessions":
        return DENIALS["too_many_streams"][1].format(s=DEFAULT_RETRY_MS / 1000)
    return template.format(**values)


def denial(reason: str, retry_after_ms: int | None) -> tuple[str, str]:
    """Wire code and message of an admission denial; unknown reasons are auth failures."""
    code, template = DENIALS.get(reason, DENIALS["invalid_api_key"])
    return code, template.format(s=(retry_after_ms or DEFAULT_RETRY_MS) / 1000)


def close_code(code: str) -> int:
    """LM-7 close code of a fatal error code."""
    return protocol.CLOSE_CODES.get(code, 1011)


def cleared() -> dict[str, Any]:
    """input_audio_buffer.cleared."""
    return server_event("input_audio_buffer.cleared")


def vllm_session_updated(model: str) -> dict[str, Any]:
    """vLLM's session.updated{model} (VL-2)."""
    return protocol.VllmSessionUpdated(model=model).model_dump()


class RealtimeSender(WorkerClientConsumer):
    """Sending side of the realtime consumer, and its metering hook points."""

    session: RealtimeSession
    admission: Admission | None = None
    usage: RealtimeUsage | None = None
    accepted_at: float
    stats: dict[str, int]
    outbox: deque[Message]
    full_since: float | None
    timers: NamedTimers
    failing_over: bool

    async def fail(
        self,
        code: str,
        *,
        message: str | None = None,
        close_code: int | None = None,
        retry_after_ms: int | None = None,
        admission: bool = False,
        reason: str | None = None,
    ) -> None:
        """One error event, then close (RealtimeConsumer implements it)."""
        raise NotImplementedError

    async def failover(self) -> None:
        """Move the job to another worker (RealtimeConsumer implements it)."""
        raise NotImplementedError

    async def stop(self, reason: str) -> None:
        """End the session for an accounts E7 reason (RealtimeConsumer implements it)."""
        raise NotImplementedError

    # Metering (realtime §12) through asr.usage, which calls accounts.metering.

    async def meter_open(self) -> None:
        """AU-4, MT-1: commit the usage record before session.created (accounts U2).

        Raises ``AdmissionDenied("usage_unavailable")`` when the database refuses.
        """
        assert self.usage is not None
        version = self.link.model_version if self.link is not None else ""
        await self.usage.open(
            request_id=self.session.session_id, model=version or settings.ASR_MODEL
        )

    async def meter_reserve_audio(self, samples: int, rate: int) -> int:
        """MT-3: how many input samples of an append fit in the quota reservations."""
        if self.usage is None:
            return samples
        return await self.usage.accept(samples, rate)

    def meter_audio(self, samples: int, rate: int) -> None:
        """MT-2: count accepted input samples as ``asr_audio_in_ms``."""
        if self.usage is not None:
            self.usage.audio(samples, rate)

    def meter_item(self, chars: int, latency_s: float) -> None:
        """MT-4: one completed item, ``asr_items``, ``asr_chars_out`` and latency."""
        if self.usage is not None:
            self.usage.item(chars, latency_s)

    async def meter_tick(self) -> DenialReason | None:
        """accounts E6: checkpoint when due (U5), key, lease and duration checks."""
        return await self.usage.tick() if self.usage is not None else None

    async def meter_finish(
        self, *, status: UsageStatus, error_code: str = "", close_code: int | None
    ) -> None:
        """MT-1, U8: finalize the record once, under asyncio.shield; later calls do nothing."""
        if self.usage is not None:
            await self.usage.finish(
                status=status, error_code=error_code, close_code=close_code
            )

    @property
    def expires_at(self) -> int:
        """CN-8: accept time plus the shorter of the setting and the plan's limit."""
        limit = settings.ASR_MAX_SESSION_S
        if self.admission is not None:
            limit = min(limit, self.admission.principal.max_session_seconds or limit)
        return int(self.accepted_at + limit)

    @property
    def openai(self) -> bool:
        """Events use OpenAI shapes (the dialect, or undetermined)."""
        return self.session.dialect is not Dialect.VLLM

    def session_created(self) -> dict[str, Any]:
        """CN-7: the GA session plus vLLM's top-level ``id`` and ``created``."""
        return server_event(
            "session.created",
            id=self.session.session_id,
            created=int(self.accepted_at),
            session=self._session_object(),
        )

    def session_updated(self) -> dict[str, Any]:
        """session.updated with the effective configuration (SE-1)."""
        return server_event("session.updated", session=self._session_object())

    def beta_session_updated(self) -> dict[str, Any]:
        """transcription_session.updated (SE-12)."""
        session = beta_session_object(
            self.session.config, session_id=self.session.session_id
        )
        return server_event("transcription_session.updated", session=session)

    def _session_object(self) -> dict[str, Any]:
        return session_object(
            self.session.config,
            session_id=self.session.session_id,
            expires_at=self.expires_at,
        )

    async def send_error(
        self,
        code: str,
        text: str,
        *,
        param: str | None = None,
        event_id: str | None = None,
        retry_after_ms: int | None = None,
        openai: bool = False,
    ) -> None:
        """The one error sender: OpenAI envelope (ER-1) or vLLM's flat one (VL-1)."""
        if self.openai or openai:
            event = error_event(
                code,
                text,
                param=param,
                client_event_id=event_id,
                retry_after_ms=retry_after_ms,
            )
        else:
            event = vllm_error(code, text)
        await self.send_json(event)

    async def perform(self, outs: list[Out]) -> None:
        """Carry out session outputs in order, then flush the worker queue."""
        for out in outs:
            if self.closed():
                return
            if isinstance(out, Overflow):
                text = message("pending_overflow") if out.pending else None
                await self.fail("buffer_overflow", message=text)
                return
            if isinstance(out, OpenItem | Forward | WorkerCommit | Drop):
                self._to_worker(out)
            else:
                await self._to_client(out)
        await self.pump()

    def _to_worker(self, out: OpenItem | Forward | WorkerCommit | Drop) -> None:
        assert self.link is not None
        job_id, item = self.link.job_id, out.item
        if isinstance(out, OpenItem):
            assert item.options is not None
            self.to_worker(
                AsrItemOpen(
                    job_id=job_id,
                    item_seq=item.seq,
                    language=item.options.language,
                    prompt=item.options.prompt,
                    stream=out.stream,
                    prefix_text=item.emitted,
                    logprobs=item.options.logprobs,
                )
            )
        elif isinstance(out, Forward):
            self.stats["audio_messages"] += 1
            self.stats["pcm_bytes"] += len(out.pcm)
            self.to_worker(
                AsrAudio(
                    job_id=job_id, item_seq=item.seq, offset=out.offset, pcm=out.pcm
                )
            )
        elif isinstance(out, WorkerCommit):
            self.to_worker(
                AsrCommit(job_id=job_id, item_seq=item.seq, total_samples=out.total)
            )
        else:
            self.to_worker(AsrDrop(job_id=job_id, item_seq=item.seq))

    async def _to_client(self, out: ClientOut) -> None:
        if isinstance(out, Completed):
            latency = time.monotonic() - out.item.committed_at
            metrics.TTFB.labels("asr").observe(latency)
            self.meter_item(len(out.transcript), latency)
        logprobs = self.session.config.logprobs
        events = (
            openai_events(out, beta=self.session.beta, logprobs=logprobs)
            if self.openai
            else vllm_events(out, logprobs=logprobs)
        )
        for event in events:
            await self.send_json(event)

    def to_worker(self, message: Message) -> None:
        """Queue a message for the pinned worker; dropped while failing over (replay covers it)."""
        if not self.failing_over and self.link is not None:
            self.outbox.append(message)

    async def pump(self) -> None:
        """Send queued messages in order; ChannelFull retries until the stall limit (WK-7)."""
        while self.outbox and not self.failing_over and self.link is not None:
            if not await self.link.send(self.outbox[0]):
                now = time.monotonic()
                self.full_since = self.full_since or now
                if now - self.full_since > settings.ASR_WORKER_STALL_S:
                    await self.failover()
                elif not self.timers.armed("pump"):
                    self.timers.arm("pump", PUMP_RETRY_S)
                return
            self.outbox.popleft()
            self.full_since = None
