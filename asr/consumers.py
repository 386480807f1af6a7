"""The ``/v1/realtime`` consumer: thin I/O between the client, accounts and a worker job.

Protocol state lives in ``asr.session.RealtimeSession``, which returns outputs; this consumer
parses frames, runs the CPU-heavy audio steps off the loop (AR-2), performs the outputs (wire
events, worker messages) and reacts to worker replies and timers as separate dispatched
messages (AR-3). Usage is metered through ``asr.usage`` (the ``meter_*`` methods of
``asr.wire.RealtimeSender``): one record per connection, opened before ``session.created``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from django.conf import settings

from accounts.admission import Admission, admit
from accounts.exceptions import AdmissionDenied
from asr import wire
from asr.config import (
    ConfigError,
    default_config,
)
from asr.engines.base import MODEL_RATE
from asr.handlers import RealtimeHandlers
from asr.messages import AsrDelta, AsrFinal, AsrOpen, AsrResync
from asr.protocol import ClientEvent, ProtocolError, parse_client_event
from asr.session import AsrState, Dialect, RealtimeSession, dialect_signal
from asr.usage import RealtimeUsage
from asr.vad import AudioFrontEnd
from gateway import jsontext, metrics
from gateway.budget import ControlBudget
from gateway.contracts import JobFailed, Message
from gateway.jobclient import Outcome
from gateway.logs import new_request_id
from gateway.timers import NamedTimers, Ticker

logger = logging.getLogger(__name__)

# accounts E6 asks for a tick at least once a second; half that keeps a revocation's stop
# within E7's 1 s even when the tick waits behind a client event.
TICK_S = 0.5
SUBPROTOCOLS = ("realtime", "openai-beta.realtime-v1")  # CN-3, in preference order
# Events that cost a worker message or a reply each; appends are bounded by size instead.
CONTROL_EVENTS = frozenset(
    (
        "session.update",
        "transcription_session.update",
        "input_audio_buffer.commit",
        "input_audio_buffer.clear",
    )
)


class RealtimeConsumer(RealtimeHandlers):
    """One realtime transcription session, OpenAI or vLLM dialect."""

    endpoint = "asr"

    async def connect(self) -> None:
        """Accept (CN-3, CN-4), admit (AU-4), then ask a worker for a slot (WK-2)."""
        offered = self.scope.get("subprotocols") or []
        await self.accept(
            subprotocol=next((p for p in SUBPROTOCOLS if p in offered), None)
        )
        new_request_id()
        self.accepted_at = time.time()
        self.session = self.build_session(offered)
        self.front = AudioFrontEnd(self.session.config.format, self.session.config.rate)
        self.early: list[tuple[str | None, bytes | None]] = []
        self.early_bytes = 0
        self.outbox: deque[Message] = deque()
        self.full_since: float | None = None
        self.timers = NamedTimers(self.post_later)
        self.ticker = Ticker(self.post_now, "tick", TICK_S)
        self.failing_over = False
        self.failovers = 0
        self.released = False
        self.stats = {"audio_messages": 0, "pcm_bytes": 0, "input_bytes": 0}
        self.last_message_at = time.monotonic()
        self.control = ControlBudget.from_settings()
        self.count_open()
        try:
            self.admission = await self.admit()
        except AdmissionDenied as denied:
            await self.deny(denied.reason, denied.retry_after_ms)
            return
        self.stream_id = (
            self.admission.stream_id if self.admission is not None else uuid.uuid4()
        )
        self.usage = RealtimeUsage(
            self.admission,
            stream_id=self.stream_id,
            started_at=datetime.fromtimestamp(self.accepted_at, tz=UTC),
        )
        await self.submit()

    async def admit(self) -> Admission | None:
        """accounts E1 for this stream; None would meter to the ``anonymous`` key."""
        return await admit(self.scope, endpoint="asr")

    def build_session(self, offered: list[str]) -> RealtimeSession:
        """Session state from the query string, headers and settings (CN-2, CN-6, DI-1)."""
        query = parse_qs(bytes(self.scope.get("query_string", b"")).decode("latin-1"))
        dialect = (query.get("dialect") or [settings.ASR_DIALECT])[-1]
        fixed = {"openai": Dialect.OPENAI, "vllm": Dialect.VLLM}.get(dialect)
        if fixed is None and settings.ASR_DIALECT in ("openai", "vllm"):
            fixed = Dialect(settings.ASR_DIALECT)
        headers = dict(self.scope.get("headers") or [])
        beta = b"realtime=v1" in headers.get(b"openai-beta", b"") or (
            "openai-beta.realtime-v1" in offered
        )
        models = self.models()
        config = default_config(
            models,
            query_model=query["model"][-1] if query.get("model") else None,
            turn=settings.ASR_DEFAULT_TURN_DETECTION,
            vllm=fixed is Dialect.VLLM,
        )
        return RealtimeSession(
            config=config,
            dialect=fixed or Dialect.UNDETERMINED,
            beta=beta and fixed is not Dialect.VLLM,
            trim=settings.ASR_TRIM_NONSPEECH,
            precommit_deltas=settings.ASR_PRECOMMIT_DELTAS,
            max_samples=int(settings.ASR_MAX_BUFFER_S * MODEL_RATE),
            max_pending_samples=int(settings.ASR_MAX_PENDING_S * MODEL_RATE),
        )

    async def submit(self) -> None:
        """Send asr.job.open through a fresh link; the answer arrives as a message.

        The job id is the accounts stream id (WK-1); a failover's job gets a new name, so
        the cancel sent to the lost worker can never reach the job that replaces it.
        """
        job_id = str(self.stream_id)
        if self.failovers:
            job_id += f".f{self.failovers}"
        link = self.new_link(
            kind="asr",
            answer_ms=settings.ASR_WORKER_ANSWER_MS,
            wait_ms=settings.ASR_ADMISSION_WAIT_MS,
            stall_s=settings.ASR_WORKER_STALL_S,
        )

        def build(job_id: str, deadline: float) -> AsrOpen:
            return AsrOpen(
                job_id=job_id,
                reply_channel=self.channel_name,
                deadline=deadline,
                model=settings.ASR_MODEL,
            )

        await self.on_outcome(await link.submit(build, job_id=job_id))

    async def disconnect(self, code: int) -> None:
        """LM-6: finish the record, cancel the worker job, timers and admission, once."""
        if getattr(self, "session", None) is None:
            return
        if self.session.state is not AsrState.CLOSED:
            self.session.state = AsrState.CLOSED
            # accounts U9: an ASR stream ended by client close is completed.
            await self.meter_finish(status="completed", close_code=code)
        await self.release()

    async def on_shutdown(self) -> None:
        """LM-6: gateway shutdown is a normal server close (U9), with 1001."""
        self.session.state = AsrState.CLOSED
        await self.meter_finish(status="completed", close_code=1001)
        await self.release()
        await self.close(code=1001)

    async def release(self) -> None:
        """Give back the worker slot, the timers and the admission (idempotent); each
        step runs even when an earlier one failed (issue 9)."""
        if self.released:
            return
        self.released = True
        self.timers.disarm_all()
        self.outbox.clear()
        await self.release_each(
            self.count_closed, self.ticker.stop, self.close_link, self.release_lease
        )
        logger.info(
            "asr session %s closed: %d audio messages, %d pcm bytes to the worker; %s",
            self.session.session_id,
            self.stats["audio_messages"],
            self.stats["pcm_bytes"],
            self.usage.describe() if self.usage is not None else "not admitted",
        )

    async def close_link(self) -> None:
        """Cancel the worker job (LM-6), also one still being admitted."""
        if self.link is not None:
            await self.link.close()

    async def release_lease(self) -> None:
        """Give back the admission, after the record as accounts.metering says."""
        if self.usage is not None:
            await self.usage.release()
        elif self.admission is not None:
            await self.admission.release()

    async def send_internal_error(self) -> None:
        """The boundary's error event: ``internal_error`` (vLLM ``processing_error``)."""
        code = "processing_error" if self.vllm else "internal_error"
        self.session.state = AsrState.CLOSED
        await self.send_error(code, wire.message(code))

    async def release_failed(self) -> None:
        """The boundary's release: the record ends ``failed`` / ``internal_error``, 1011."""
        if getattr(self, "session", None) is None:
            return
        self.session.state = AsrState.CLOSED
        await self.release_each(
            lambda: self.meter_finish(
                status="failed", error_code="internal_error", close_code=1011
            ),
            self.release,
        )

    def closed(self) -> bool:
        """True once the session has ended (or before it began)."""
        session = getattr(self, "session", None)
        return session is None or session.state is AsrState.CLOSED

    # Client frames.

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        """Handle one frame; frames received during admission wait for session.created."""
        if self.session.state is AsrState.CLOSED:
            return
        if self.session.state is AsrState.ADMITTING:
            self.early.append((text_data, bytes_data))
            self.early_bytes += len(text_data or bytes_data or "")
            if self.early_bytes > settings.ASR_MAX_EARLY_BYTES:  # issue 9: a few MB
                self.early.clear()
                await self.fail("buffer_overflow")
            return
        await self.handle_frame(text_data, bytes_data)

    async def handle_frame(self, text: str | None, data: bytes | None) -> None:
        """LM-1, parse, dialect detection (DI-2), dispatch; errors are one event each."""
        self.last_message_at = time.monotonic()
        size = len(data) if data is not None else jsontext.utf8_size(text or "")
        if size > settings.ASR_MAX_MESSAGE_BYTES:
            await self.fail("message_too_large")
            return
        event: ClientEvent | None = None
        try:
            event = parse_client_event(text, data, vllm=self.vllm)
            if event.type in CONTROL_EVENTS and not self.control.take():
                await self.fail(
                    "rate_limit_exceeded",
                    message=wire.message(
                        "rate_limit_exceeded",
                        retry=self.control.retry_after_ms() / 1000,
                    ),
                    retry_after_ms=self.control.retry_after_ms(),
                )
                return
            signal = dialect_signal(event)
            if signal is not None and self.session.dialect is Dialect.UNDETERMINED:
                await self.set_dialect(signal)
            await self.handlers()[event.type](event)
        except (ProtocolError, ConfigError) as exc:
            own = event.event_id if event is not None else None
            event_id: str | None = getattr(exc, "event_id", None) or own
            await self.send_error(
                exc.code, exc.message, param=exc.param, event_id=event_id
            )

    # Worker replies (AR-3: each is its own dispatched message).

    async def gpu_asr_delta(self, message: dict[str, Any]) -> None:
        """Handle gpu.asr.delta: confirmed words of an item."""
        if self.alive(message):
            delta = AsrDelta.from_message(message)
            item = self.session.find(delta.item_seq)
            if item is not None:
                await self.perform(self.session.delta(item, delta.text, delta.logprobs))

    async def gpu_asr_final(self, message: dict[str, Any]) -> None:
        """Handle gpu.asr.final: the remainder, completed, item done."""
        if self.alive(message):
            final = AsrFinal.from_message(message)
            item = self.session.find(final.item_seq)
            if item is not None and item.commit_point is not None:
                outs = self.session.final(
                    item,
                    final.text,
                    final.logprobs,
                    final.prompt_tokens,
                    final.completion_tokens,
                )
                await self.perform(outs)

    async def gpu_asr_resync(self, message: dict[str, Any]) -> None:
        """Handle gpu.asr.resync: resend an item's audio from what the worker has (WK-6)."""
        if self.alive(message):
            resync = AsrResync.from_message(message)
            item = self.session.find(resync.item_seq)
            if item is not None:
                await self.perform(self.session.resend(item, resync.have_samples))

    async def gpu_job_failed(self, message: dict[str, Any]) -> None:
        """Handle gpu.job.failed: a final failure fails the item; others end the session."""
        if not self.alive(message):
            return
        failed = JobFailed.from_message(message)
        item = (
            self.session.find(failed.item_seq) if failed.item_seq is not None else None
        )
        if failed.stage == "final" and item is not None:
            await self.perform(self.session.failed(item))
        elif failed.code == "worker_shutdown":
            await self.failover()
        else:
            await self.fail("inference_failed")

    def alive(self, message: dict[str, Any]) -> bool:
        """The reply is from the pinned worker of an open session (it also feeds WK-7)."""
        return not self.closed() and self.link is not None and self.link.touch(message)

    async def gpu_job_heartbeat(self, message: dict[str, Any]) -> None:
        """Handle gpu.job.heartbeat: the pinned worker is alive."""
        self.alive(message)

    # Admission, failover, timers.

    async def on_outcome(self, outcome: Outcome | None) -> None:
        """Accepted → session.created (or replay after failover); else deny or fail."""
        if outcome is None or self.closed():
            return
        if outcome is Outcome.ACCEPTED:
            if self.failing_over:
                self.failing_over = False
                logger.info(
                    "asr session %s: replaying to a new worker", self.session.session_id
                )
                await self.perform(self.session.replay())
            else:
                await self.open_session()
            return
        if outcome is Outcome.LOST:  # the link confirmed the silence after its queue
            await self.failover()
        elif self.failing_over or outcome is Outcome.NOT_LOADED:
            await self.fail("engine_unavailable", admission=not self.failing_over)
        else:
            await self.fail(
                "too_many_sessions",
                close_code=1013,
                retry_after_ms=1000,
                admission=True,
            )

    async def open_session(self) -> None:
        """AU-4, CN-7: usage record, session.created, timers, then the early frames."""
        try:
            await self.meter_open()
        except AdmissionDenied as denied:  # usage_unavailable: serve nothing (U2)
            code = wire.STOPS.get(denied.reason, "service_unavailable")
            await self.fail(code, admission=True, reason=denied.reason)
            return
        self.session.state = AsrState.OPEN
        metrics.REQUESTS.labels("asr").inc()
        await self.send_json(self.session_created())
        if settings.ASR_IDLE_TIMEOUT_S:
            self.timers.arm("idle", settings.ASR_IDLE_TIMEOUT_S)
        self.timers.arm("expire", max(0.0, self.expires_at - time.time()))
        self.ticker.start()  # accounts E6
        early, self.early = self.early, []
        for text, data in early:
            if self.closed():
                return
            await self.handle_frame(text, data)

    async def failover(self) -> None:
        """WK-7: the worker is lost; re-run admission and replay unfinished items."""
        if self.failing_over or self.closed():
            return
        logger.warning(
            "asr session %s: worker lost, failing over", self.session.session_id
        )
        self.failing_over = True
        self.failovers += 1
        self.outbox.clear()
        self.full_since = None
        if self.link is not None:
            await self.link.close()
        await self.submit()

    async def on_timer(self, name: str) -> None:
        """The usage tick, idle (LM-3), expiry (LM-4) and the outbox retry."""
        if name == self.ticker.name:
            await self.tick()
            return
        timer = self.timers.fired(name)
        if timer == "pump":
            await self.pump()
        elif timer == "expire":
            await self.fail("session_expired", reason=self.expiry_reason())
        elif timer == "idle":
            idle = time.monotonic() - self.last_message_at
            if idle >= settings.ASR_IDLE_TIMEOUT_S:
                await self.fail("idle_timeout")
            else:
                self.timers.arm("idle", settings.ASR_IDLE_TIMEOUT_S - idle)

    async def tick(self) -> None:
        """accounts E6 (checkpoint, key, lease, duration); a stop ends the session (LM-5)."""
        self.ticker.ticked()
        reason = await self.meter_tick()
        if reason is not None:
            await self.stop(reason)

    async def stop(self, reason: str) -> None:
        """accounts E7: the reason's wire error and close; the record keeps the reason."""
        await self.fail(wire.STOPS.get(reason, "service_unavailable"), reason=reason)

    def expiry_reason(self) -> str:
        """LM-4: the plan's maximum duration is accounts' E7 stop, else the wire code."""
        plan = self.admission.principal.max_session_seconds if self.admission else None
        if plan is not None and plan <= settings.ASR_MAX_SESSION_S:
            return "max_session_duration"
        return "session_expired"

    # Termination.

    async def deny(self, reason: str, retry_after_ms: int | None) -> None:
        """AU-4: one admission error in the OpenAI envelope, then close."""
        code, message = wire.denial(reason, retry_after_ms)
        retry = (
            (retry_after_ms or 1000)
            if code in ("too_many_sessions", "rate_limit_exceeded")
            else None
        )
        await self.fail(code, message=message, retry_after_ms=retry, admission=True)

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
        """One error event, then close with the code as reason (ER-2, LM-7).

        The record is finished first (MT-1, U9): ``completed`` after an idle timeout, else
        ``failed`` with ``reason`` (an accounts E3 reason) or the wire code as error_code.
        """
        if self.closed():
            return
        self.session.state = AsrState.CLOSED
        metrics.ERRORS.labels("asr", code).inc()
        await self.send_error(
            code,
            message or wire.message(code),
            retry_after_ms=retry_after_ms,
            openai=admission,
        )
        close_code = close_code or wire.close_code(code)
        if code == "idle_timeout":
            await self.meter_finish(status="completed", close_code=close_code)
        else:
            error_code = reason or code
            await self.meter_finish(
                status="failed", error_code=error_code, close_code=close_code
            )
        await self.release()
        await self.close(code=close_code, reason=code)
