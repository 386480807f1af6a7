"""The ``/v1/realtime`` consumer: thin I/O between the client, accounts and a worker job.

``receive`` parses each frame once into a typed event (``asr.protocol``), and
``asr.handlers.ClientHandlers`` applies it to the session (``asr.session``), yielding outputs;
worker replies (``gpu.*``) and timers (``timer.*``) are separate dispatched messages (AR-3) that
the session answers with outputs too. ``perform`` is the one place that carries outputs out:
wire events (``asr.events``), ``asr.job.*`` messages through the worker outbox, errors and
stops. Usage is metered through ``asr.usage``: one record per connection, opened before
``session.created``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from accounts.admission import Admission, admit
from accounts.exceptions import AdmissionDenied
from asr import connection, errors, events
from asr.config import ConfigError, Models
from asr.events import ClientOut, SessionCreated
from asr.handlers import Action, ClientHandlers, Steps, Stop
from asr.items import Completed, Forward, Overflow, WorkerOut, worker_message
from asr.messages import AsrDelta, AsrFinal, AsrOpen, AsrResync
from asr.outbox import Flush, WorkerOutbox
from asr.protocol import ClientEvent, Dialect, ProtocolError, parse_client_event
from asr.session import AsrState, RealtimeSession
from asr.usage import RealtimeUsage, UsageStatus
from gateway import jsontext, metrics
from gateway.budget import ControlBudget
from gateway.consumers import WorkerClientConsumer
from gateway.contracts import JobFailed
from gateway.jobclient import Outcome
from gateway.logs import new_request_id
from gateway.timers import NamedTimers, Ticker

logger = logging.getLogger(__name__)

# accounts E6 asks for a tick at least once a second; half that keeps a revocation's stop
# within E7's 1 s even when the tick waits behind a client event.
TICK_S = 0.5
PARSE_INLINE_LIMIT = 64 * 1024  # AR-2: larger frames are parsed (base64) off the loop
PUMP_RETRY_S = 0.05  # ChannelFull: retry the worker queue after this


class RealtimeConsumer(WorkerClientConsumer):
    """One realtime transcription session, OpenAI or vLLM dialect."""

    endpoint = "asr"
    session: RealtimeSession
    admission: Admission | None = None
    usage: RealtimeUsage | None = None
    handlers: ClientHandlers

    async def connect(self) -> None:
        """Accept (CN-3, CN-4), admit (AU-4), then ask a worker for a slot (WK-2)."""
        await self.accept(subprotocol=connection.subprotocol(self.scope))
        new_request_id()
        self.accepted_at = time.time()
        self.session = connection.new_session(self.scope, accepted_at=self.accepted_at)
        self.early: list[tuple[str | None, bytes | None]] = []
        self.early_bytes = 0
        self.outbox = WorkerOutbox(stall_s=settings.ASR_WORKER_STALL_S)
        self.timers = NamedTimers(self.post_later)
        self.ticker = Ticker(self.post_now, "tick", TICK_S)
        self.failing_over = False
        self.failovers = 0
        self.released = False
        self.stats = {"audio_messages": 0, "pcm_bytes": 0}
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
        self.session.expires_at = connection.expires_at(
            self.accepted_at, self.admission
        )
        self.handlers = ClientHandlers(self.session, self.usage)
        await self.submit()

    async def admit(self) -> Admission | None:
        """accounts E1 for this stream; None would meter to the ``anonymous`` key."""
        return await admit(self.scope, endpoint="asr")

    def models(self) -> Models:
        """What the pinned worker serves (SE-15, row 8)."""
        return connection.served_models(self.link.model_version if self.link else "")

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
        """LM-1, parse, control budget, dialect (DI-2), apply; errors are one event each."""
        self.last_message_at = time.monotonic()
        size = len(data) if data is not None else jsontext.utf8_size(text or "")
        if size > settings.ASR_MAX_MESSAGE_BYTES:
            await self.fail("message_too_large")
            return
        event: ClientEvent | None = None
        try:
            event = await self.parse(text, data, size)
            if event.control and not self.control.take():
                retry_ms = self.control.retry_after_ms()
                text = errors.message("rate_limit_exceeded", retry=retry_ms / 1000)
                await self.fail(
                    "rate_limit_exceeded", message=text, retry_after_ms=retry_ms
                )
                return
            if event.selects is not None:
                await self.drive(self.handlers.set_dialect(event.selects))
            await self.drive(self.handlers.steps(event, self.models()))
        except (ProtocolError, ConfigError) as exc:
            if isinstance(exc, ProtocolError) and exc.selects is not None:
                await self.drive(self.handlers.set_dialect(exc.selects))
            own = event.event_id if event is not None else None
            event_id: str | None = getattr(exc, "event_id", None) or own
            await self.send_error(
                exc.code, exc.message, param=exc.param, event_id=event_id
            )

    async def parse(
        self, text: str | None, data: bytes | None, size: int
    ) -> ClientEvent:
        """``parse_client_event`` in the session's dialect, off the loop when large."""
        dialect, fmt = self.session.dialect, self.session.config.format
        if size > PARSE_INLINE_LIMIT:
            return await asyncio.to_thread(
                parse_client_event,
                text,
                data,
                dialect=dialect,
                pcm16=fmt == "audio/pcm",
            )
        return parse_client_event(text, data, dialect=dialect, pcm16=fmt == "audio/pcm")

    async def drive(self, steps: Steps) -> None:
        """Perform a handler's output batches in order; stop it once the session closed."""
        async with contextlib.aclosing(steps):
            async for actions in steps:
                await self.perform(actions)
                if self.closed():
                    return

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
            f = AsrFinal.from_message(message)
            item = self.session.find(f.item_seq)
            if item is not None and item.commit_point is not None:
                outs = self.session.final(
                    item, f.text, f.logprobs, f.prompt_tokens, f.completion_tokens
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
        seq = failed.item_seq
        item = self.session.find(seq) if seq is not None else None
        if failed.stage == "final" and item is not None:
            await self.perform(self.session.failed(item))
        elif failed.code == "worker_shutdown":
            await self.failover()
        else:
            await self.fail("inference_failed")

    async def gpu_job_heartbeat(self, message: dict[str, Any]) -> None:
        """Handle gpu.job.heartbeat: the pinned worker is alive."""
        self.alive(message)

    def alive(self, message: dict[str, Any]) -> bool:
        """The reply is from the pinned worker of an open session (it also feeds WK-7)."""
        return not self.closed() and self.link is not None and self.link.touch(message)

    # Outputs: the one place that does their I/O.

    async def perform(self, actions: Sequence[Action]) -> None:
        """Carry out outputs in order, then flush the worker queue."""
        for out in actions:
            if self.closed():
                return
            if isinstance(out, Overflow):
                text = errors.message("pending_overflow") if out.pending else None
                await self.fail("buffer_overflow", message=text)
                return
            if isinstance(out, Stop):
                await self.stop(out.reason)
            elif isinstance(out, WorkerOut):
                self.to_worker(out)
            else:
                await self.to_client(out)
        await self.pump()

    def to_worker(self, out: WorkerOut) -> None:
        """Queue a worker message; dropped while failing over (the replay covers it)."""
        if self.failing_over or self.link is None:
            return
        if isinstance(out, Forward):
            self.stats["audio_messages"] += 1
            self.stats["pcm_bytes"] += len(out.pcm)
        self.outbox.append(worker_message(out, self.link.job_id))

    async def to_client(self, out: ClientOut) -> None:
        """Send an output's wire events; a completed item is metered (MT-4)."""
        if isinstance(out, Completed) and self.usage is not None:
            latency = time.monotonic() - out.item.committed_at
            metrics.TTFB.labels("asr").observe(latency)
            self.usage.item(len(out.transcript), latency)
        for event in events.server_events(out, self.session):
            await self.send_json(event)

    async def pump(self) -> None:
        """Send queued messages; ChannelFull retries until the stall limit (WK-7)."""
        if self.failing_over or self.link is None:
            return
        flushed = await self.outbox.flush(self.link)
        if flushed is Flush.STALLED:
            await self.failover()
        elif flushed is Flush.RETRY and not self.timers.armed("pump"):
            self.timers.arm("pump", PUMP_RETRY_S)

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
        event = events.error(
            code,
            text,
            openai=openai or self.session.dialect is not Dialect.VLLM,
            param=param,
            event_id=event_id,
            retry_after_ms=retry_after_ms,
        )
        await self.send_json(event)

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
        assert self.usage is not None
        version = self.link.model_version if self.link is not None else ""
        try:  # MT-1: the record is committed before session.created (accounts U2)
            await self.usage.open(
                request_id=self.session.session_id, model=version or settings.ASR_MODEL
            )
        except AdmissionDenied as denied:  # usage_unavailable: serve nothing (U2)
            code = errors.STOPS.get(denied.reason, "service_unavailable")
            await self.fail(code, admission=True, reason=denied.reason)
            return
        self.session.state = AsrState.OPEN
        metrics.REQUESTS.labels("asr").inc()
        await self.to_client(SessionCreated())
        if settings.ASR_IDLE_TIMEOUT_S:
            self.timers.arm("idle", settings.ASR_IDLE_TIMEOUT_S)
        self.timers.arm("expire", max(0.0, self.session.expires_at - time.time()))
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
        if self.link is not None:
            await self.link.close()
        await self.submit()

    async def on_timer(self, name: str) -> None:
        """The usage tick (accounts E6), idle (LM-3), expiry (LM-4), the outbox retry."""
        if name == self.ticker.name:
            self.ticker.ticked()
            reason = await self.usage.tick() if self.usage is not None else None
            if reason is not None:
                await self.stop(reason)
            return
        timer = self.timers.fired(name)
        if timer == "pump":
            await self.pump()
        elif timer == "expire":
            await self.fail(
                "session_expired", reason=connection.expiry_reason(self.admission)
            )
        elif timer == "idle":
            idle = time.monotonic() - self.last_message_at
            if idle >= settings.ASR_IDLE_TIMEOUT_S:
                await self.fail("idle_timeout")
            else:
                self.timers.arm("idle", settings.ASR_IDLE_TIMEOUT_S - idle)

    # Termination.

    async def stop(self, reason: str) -> None:
        """accounts E7: the reason's wire error and close; the record keeps the reason."""
        await self.fail(errors.STOPS.get(reason, "service_unavailable"), reason=reason)

    async def deny(self, reason: str, retry_after_ms: int | None) -> None:
        """AU-4: one admission error in the OpenAI envelope, then close."""
        code, message = errors.denial(reason, retry_after_ms)
        limited = code in ("too_many_sessions", "rate_limit_exceeded")
        retry = (retry_after_ms or 1000) if limited else None
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
            message or errors.message(code),
            retry_after_ms=retry_after_ms,
            openai=admission,
        )
        close_code = close_code or errors.close_code(code)
        if code == "idle_timeout":
            await self.finish_usage("completed", close_code=close_code)
        else:
            await self.finish_usage(
                "failed", error_code=reason or code, close_code=close_code
            )
        await self.release()
        await self.close(code=close_code, reason=code)

    async def finish_usage(
        self, status: UsageStatus, *, error_code: str = "", close_code: int | None
    ) -> None:
        """MT-1, U8: finalize the record once, under asyncio.shield; later calls do nothing."""
        if self.usage is not None:
            await self.usage.finish(
                status=status, error_code=error_code, close_code=close_code
            )

    async def disconnect(self, code: int) -> None:
        """LM-6: finish the record, cancel the worker job, timers and admission, once."""
        if getattr(self, "session", None) is None:
            return
        if self.session.state is not AsrState.CLOSED:
            self.session.state = AsrState.CLOSED
            # accounts U9: an ASR stream ended by client close is completed.
            await self.finish_usage("completed", close_code=code)
        await self.release()

    async def on_shutdown(self) -> None:
        """LM-6: gateway shutdown is a normal server close (U9), with 1001."""
        self.session.state = AsrState.CLOSED
        await self.finish_usage("completed", close_code=1001)
        await self.release()
        await self.close(code=1001)

    async def send_internal_error(self) -> None:
        """The boundary's error event: ``internal_error`` (vLLM ``processing_error``)."""
        vllm = self.session.dialect is Dialect.VLLM
        code = "processing_error" if vllm else "internal_error"
        self.session.state = AsrState.CLOSED
        await self.send_error(code, errors.message(code))

    async def release_failed(self) -> None:
        """The boundary's release: the record ends ``failed`` / ``internal_error``, 1011."""
        if getattr(self, "session", None) is None:
            return
        self.session.state = AsrState.CLOSED
        await self.release_each(
            lambda: self.finish_usage(
                "failed", error_code="internal_error", close_code=1011
            ),
            self.release,
        )

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

    def closed(self) -> bool:
        """True once the session has ended (or before it began)."""
        session = getattr(self, "session", None)
        return session is None or session.state is AsrState.CLOSED
