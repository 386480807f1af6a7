"""The ``/v1/tts/ws`` consumer: thin I/O between the client, accounts and a worker job.

Handlers never await a worker: replies (``gpu.*``) and timers (``timer.fire``, the usage tick
included) arrive as separate dispatched messages (Q5). Incremental text input (§9.2) lives in
``tts.incremental``, audio output in ``tts.forwarding``, metering in ``tts.usage``.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.conf import settings

from accounts.admission import admit
from accounts.exceptions import AdmissionDenied
from gateway import jsontext, metrics
from gateway.budget import ControlBudget
from gateway.consumers import CRASH_CLOSE_CODE, WorkerClientConsumer
from gateway.contracts import JobFailed
from gateway.jobclient import Outcome
from gateway.logs import request_id_var
from gateway.timers import NamedTimers, Ticker
from tts.errors import denial_close_code, denial_error, outcome_error
from tts.forwarding import AudioOutput
from tts.incremental import IncrementalInput
from tts.protocol import (
    CLOSE_CODES,
    NON_FATAL_CODES,
    Cancel,
    Clear,
    ClientEvent,
    End,
    Flush,
    Ping,
    ProtocolError,
    TextInput,
    TtsRequest,
    error_event,
    parse_client_event,
    rate_limit_message,
)
from tts.requests import RequestFlow, idle_timeout_s
from tts.session import ActiveRequest, StreamState, TtsSession
from tts.usage import TICK_S, TtsUsage, UsageStatus

logger = logging.getLogger(__name__)


CONTROL_EVENTS = (Ping, Cancel, Clear, Flush, End)


class TtsConsumer(WorkerClientConsumer):
    """One TTS stream: admission, requests one at a time, audio forwarding, cancel, ping."""

    endpoint = "tts"
    released = False
    draining = False  # W12: the gateway is stopping; the active request may finish

    async def connect(self) -> None:
        """Accept first (W5), then admit; a denial is one error and a close (W6)."""
        offered = self.scope.get("subprotocols") or []
        await self.accept(subprotocol="veena-tts" if "veena-tts" in offered else None)
        self.session = TtsSession()
        self.timers = NamedTimers(self.post_later)
        self.ticker = Ticker(self.post_now, "tick", TICK_S)
        self.input = IncrementalInput(self)
        self.output = AudioOutput(self)
        self.flow = RequestFlow(self)
        self.usage = TtsUsage()
        self.control = ControlBudget.from_settings()
        request_id_var.set(self.session.stream_request_id)
        self.count_open()
        try:
            if settings.TTS_AUTH_REQUIRED:
                self.usage.admission = await admit(self.scope, endpoint="tts")
        except AdmissionDenied as denied:
            await self.deny(denied)
            return
        self.ticker.start()  # accounts E6
        self.timers.arm("request", settings.TTS_REQUEST_TIMEOUT_S)

    async def disconnect(self, code: int) -> None:
        """W10: a client close cancels the active request; then release everything (Z3)."""
        if hasattr(self, "session"):
            await self.release(code)

    async def release(
        self,
        close_code: int,
        *,
        status: UsageStatus = "cancelled",
        error_code: str = "",
    ) -> None:
        """Z2/Z3 on every exit path, once: timers, tick, worker job, usage record, lease.

        Each step runs even when an earlier one failed (issue 9).
        """
        if self.released:
            return
        self.released = True
        busy = self.session.busy

        async def end_request() -> None:
            if busy:
                await self.flow.end(
                    status, error_code=error_code, close_code=close_code
                )

        async def finish_usage() -> None:
            await self.usage.finish(
                status=status, error_code=error_code, close_code=close_code
            )

        await self.release_each(
            self.count_closed,
            self.shut,
            self.ticker.stop,
            end_request,
            self.release_link,
            finish_usage,
            self.usage.release,  # after the record, as accounts.metering says
        )

    async def send_internal_error(self) -> None:
        """The boundary's error event (§6 INTERNAL_ERROR, fatal)."""
        session = self.session
        rid = self.active.request_id if session.busy else session.request_id_for()
        await self.send_json(
            error_event("INTERNAL_ERROR", "Internal server error", rid, fatal=True)
        )

    async def release_failed(self) -> None:
        """The boundary's release: the active request and the stream end as failed."""
        if hasattr(self, "session"):
            await self.release(
                CRASH_CLOSE_CODE, status="failed", error_code="internal_error"
            )

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        """Parse one client message and apply it to the stream."""
        if self.session.closed:
            return
        limit = settings.TTS_MAX_MESSAGE_BYTES
        if text_data is not None and len(text_data) * 4 > limit:
            if jsontext.utf8_size(text_data) > limit:
                await self.fail(
                    "VALIDATION_ERROR", "Message too large", close_code=1009
                )
                return
        self.on_client_message()
        try:
            event = parse_client_event(text_data, bytes_data)
        except ProtocolError as exc:
            await self.on_bad_message(exc)
            return
        await self.on_event(event)

    def on_client_message(self) -> None:
        """K5 and I6: any client message restarts the idle timers."""
        active = self.session.active
        if self.session.busy and active is not None and active.request.incremental:
            self.timers.arm("input", settings.TTS_INPUT_IDLE_S)
        elif not self.session.busy and self.session.requests_started:
            self.timers.arm("idle", idle_timeout_s())

    async def on_bad_message(self, exc: ProtocolError) -> None:
        """R3/R8/K2: an unusable message fails the stream only when nothing is active."""
        if self.session.busy and exc.event in ("request", "start"):
            await self.reject_second_request(exc.request_id)
        elif self.session.busy:
            await self.warn(
                "IGNORED_MESSAGE", "Message ignored while a request is active"
            )
        else:
            await self.fail(
                exc.code,
                exc.message,
                close_code=exc.close_code,
                request_id=exc.request_id or self.session.request_id_for(),
                keep_alive=exc.keep_alive,
                **exc.extra,
            )

    async def on_event(self, event: ClientEvent) -> None:
        """Apply one parsed client event; control events are rate-limited (issue 9)."""
        if isinstance(event, CONTROL_EVENTS) and not self.control.take():
            retry = self.control.retry_after_ms()
            await self.fail(
                "RATE_LIMIT_EXCEEDED",
                rate_limit_message(retry),
                retry_after_ms=retry,
                fatal=True,
            )
            return
        busy = self.session.busy
        match event:
            case Ping():
                await self.send_json({"event": "pong"})
            case Cancel(request_id=rid) if busy and rid in (
                None,
                self.active.request_id,
            ):
                await self.flow.complete(cancelled=True)
            case Clear() if busy and self.active.request.incremental:
                await self.input.clear()
            case Clear() if busy:
                await self.flow.complete(cancelled=True)
            case Cancel(request_id=rid):
                await self.warn("NOT_ACTIVE", "No such active request", rid)
            case Clear():
                await self.warn("NOT_ACTIVE", "No active request")
            case TtsRequest() if busy:
                await self.reject_second_request(event.request_id)
            case TtsRequest():
                await self.flow.start(event)
            case TextInput() | Flush() | End() if (
                busy and self.active.request.incremental
            ):
                await self.input.on_event(event)
            case _:
                await self.warn("IGNORED_MESSAGE", "No incremental request is active")

    @property
    def active(self) -> ActiveRequest:
        """The current request (callers check ``session.busy`` first)."""
        assert self.session.active is not None
        return self.session.active

    async def reject_second_request(self, request_id: str | None) -> None:
        """K2: non-fatal, carrying the rejected request's id; the active one goes on."""
        event = error_event(
            "VALIDATION_ERROR",
            "A request is already active",
            request_id or str(uuid.uuid4()),
            fatal=False,
        )
        await self.send_json(event)

    # Worker replies and timers (each a separately dispatched message, Q5).

    async def on_outcome(self, outcome: Outcome | None) -> None:
        """Act on what the worker link decided."""
        if outcome is None:
            return
        if not self.session.busy:
            await self.release_link()  # the request ended first: cancel its job (Q4)
        elif outcome is Outcome.ACCEPTED:
            await self.flow.accepted()
        else:
            code, message, retry = outcome_error(outcome)
            await self.fail(code, message, retry_after_ms=retry)

    async def release_link(self) -> None:
        """Z2/Q4: stop the worker job now, also one whose acceptance is still on its way.

        ``WorkerLink.close`` sends the cancel to the pinned worker; a job still being
        admitted is cancelled at the worker that accepts it (``gateway.jobclient``).
        """
        if self.link is not None:
            await self.link.close()

    async def gpu_tts_chunk(self, message: dict[str, Any]) -> None:
        """Handle gpu.tts.chunk: forward one frame, with timestamps, progress and acks."""
        await self.output.on_chunk(message)

    async def gpu_tts_flushed(self, message: dict[str, Any]) -> None:
        """Handle gpu.tts.flushed: I4's ``flushed`` after the flushed text's audio."""
        await self.output.on_flushed(message)

    async def gpu_tts_done(self, message: dict[str, Any]) -> None:
        """Handle gpu.tts.done: every frame is sent; complete the request."""
        await self.output.on_done(message)

    async def gpu_job_failed(self, message: dict[str, Any]) -> None:
        """Handle gpu.job.failed: the request ends with INTERNAL_ERROR."""
        if self.link is None or not self.link.touch(message) or not self.session.busy:
            return
        failed = JobFailed.from_message(message)
        logger.warning(
            "tts request %s: worker failed (%s)", self.active.request_id, failed.code
        )
        await self.fail("INTERNAL_ERROR", "Synthesis failed")

    def closed(self) -> bool:
        """True once the stream has ended (or before it began)."""
        return not hasattr(self, "session") or self.session.closed

    async def on_timer(self, name: str) -> None:
        """The consumer's own timers: request (W8), idle (K5), buffer (I3), input (I6)."""
        if name == self.ticker.name:
            await self.on_tick()
            return
        timer = self.timers.fired(name)
        if timer is None or self.session.closed:
            return
        if timer == "request" and not self.session.requests_started:
            timeout = settings.TTS_REQUEST_TIMEOUT_S
            await self.fail(
                "TIMEOUT", f"No request received within {timeout:g} seconds"
            )
        elif timer == "idle" and not self.session.busy:
            await self.fail(
                "TIMEOUT", f"No message received within {idle_timeout_s():g} seconds"
            )
        elif timer in ("buffer", "input") and self.session.busy:
            await self.input.on_timer(timer)
        elif timer == "sent" and self.session.busy:
            await self.output.on_sent_timer()
        elif timer == "drain" and self.session.busy:
            await self.fail("INTERNAL_ERROR", "server shutting down", close_code=1001)

    async def on_shutdown(self) -> None:
        """W12: an idle stream closes 1001 now; an active request may run for
        ``TTS_DRAIN_S``, then ends with INTERNAL_ERROR and 1001."""
        if not self.session.busy:
            await self.close_stream(1001)
            return
        self.draining = True
        self.timers.arm("drain", settings.TTS_DRAIN_S)

    async def on_tick(self) -> None:
        """accounts E6: checkpoint, key, lease, duration; a stop reason ends the stream (E7)."""
        self.ticker.ticked()
        reason = await self.usage.tick()
        if reason is not None:
            await self.deny(AdmissionDenied(reason), fatal=True)

    # Output.

    async def deny(
        self,
        denied: AdmissionDenied,
        *,
        request_id: str | None = None,
        fatal: bool | None = None,
    ) -> None:
        """An accounts denial (W6, K4, Q7) or stop (E7) as its §6 error; the record keeps
        the accounts reason as its ``error_code`` (U3)."""
        code, message, retry = denial_error(denied)
        await self.fail(
            code,
            message,
            close_code=denial_close_code(denied),
            request_id=request_id,
            fatal=fatal,
            usage_error=denied.reason,
            retry_after_ms=retry,
        )

    async def fail(
        self,
        code: str,
        message: str,
        *,
        close_code: int | None = None,
        request_id: str | None = None,
        keep_alive: bool | None = None,
        fatal: bool | None = None,
        usage_error: str | None = None,
        **extra: Any,
    ) -> None:
        """Send the one error event (§6); end the request, and the stream when fatal."""
        session = self.session
        if session.closed:
            return
        keep = session.keep_alive if keep_alive is None else keep_alive
        if fatal is None:
            fatal = not (keep and code in NON_FATAL_CODES)
        close = (close_code or CLOSE_CODES[code]) if fatal else None
        busy = session.busy
        rid = request_id or (
            self.active.request_id if busy else self.session.request_id_for()
        )
        metrics.ERRORS.labels("tts", code).inc()
        if busy:
            error_code = usage_error or code.lower()
            await self.flow.end("failed", error_code=error_code, close_code=close)
        event = error_event(code, message[:500], rid, fatal=fatal, **extra)
        await self.send_json(event)
        if close is not None:
            await self.close_stream(close)
        elif self.draining:  # W12: no further request on a stopping gateway
            await self.close_stream(1001)
        elif session.requests_started:
            self.timers.arm("idle", idle_timeout_s())

    async def close_stream(self, code: int) -> None:
        """End the stream with ``code``; the lease goes back now, not at the disconnect."""
        await self.release(code)
        await self.close(code=code)

    async def shut(self) -> None:
        """Mark the stream closed and stop the consumer's own timers."""
        self.session.state = StreamState.CLOSED
        self.timers.disarm_all()

    async def warn(
        self, code: str, message: str, request_id: str | None = None
    ) -> None:
        """Send a warning that never ends anything (E4)."""
        event: dict[str, Any] = {"event": "warning", "code": code, "message": message}
        if request_id is not None:
            event["request_id"] = request_id
        await self.send_json(event)
