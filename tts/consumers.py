"""The ``/v1/tts/ws`` consumer: thin I/O between the client, accounts and a worker job.

Built on the skeleton both consumers share (``gateway.link.consumers``): handlers never await
a worker, replies (``gpu.*``) and timers (``timer.fire``, the usage tick included) arrive as
separate dispatched messages (Q5). Decisions are pure steps that return output records
(``tts.outputs``): client events and timers in ``tts.steps``, incremental input in
``tts.incremental``, audio output in ``tts.forwarding``, state in ``tts.session``. The base's
``perform`` does their I/O, this consumer's ``do`` the TTS records. A request starts as every
TTS request does (``tts.requests``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import uuid
from functools import partial
from typing import Any, ClassVar

from django.conf import settings

from accounts.admission import admit
from accounts.exceptions import AdmissionDenied
from gateway import metrics
from gateway.contracts import JobFailed
from gateway.link.boundary import ReleaseStep
from gateway.link.budget import ControlBudget
from gateway.link.consumers import WorkerClientConsumer
from gateway.link.jobclient import Outcome, Phase
from gateway.link.outputs import Fail, TerminalStatus
from gateway.logs import request_id_var
from gateway.outages import Failure
from gateway.server.daphne_compat import TRANSPORT_EXTENSION
from tts import forwarding, outputs, steps
from tts.client import link_options
from tts.errors import denial_fail, failure_error, outcome_error
from tts.events import Complete, ServerEvent, server_message
from tts.incremental import IncrementalInput
from tts.messages import TtsAck
from tts.outputs import TtsFail
from tts.protocol import TtsRequest
from tts.requests import RequestPlan, start_on_stream
from tts.session import (
    REQUEST_STATES,
    STREAM_STATES,
    ActiveRequest,
    RequestState,
    StreamState,
    TtsSession,
)
from tts.usage import TtsUsage

logger = logging.getLogger(__name__)

# E7's stops of a stream with no request running: no request of the key was refused.
STREAM_STOPS = (
    "key_revoked",
    "lease_lost",
    "max_session_duration",
    "usage_unavailable",
)


class TtsConsumer(WorkerClientConsumer):
    """One TTS stream: admission, requests one at a time, audio forwarding, cancel, ping."""

    endpoint = "tts"
    disconnect_status: ClassVar[TerminalStatus] = "cancelled"  # W10
    draining = False  # W12: the gateway is stopping; the active request may finish
    plan: RequestPlan | None = None  # the current (or last) request's start
    input: IncrementalInput | None = None  # an incremental request's input (§9.2)

    async def connect(self) -> None:
        """Accept first (W5), then admit; a denial is one error and a close (W6)."""
        offered = self.scope.get("subprotocols") or []
        await self.accept(subprotocol="veena-tts" if "veena-tts" in offered else None)
        self.session = TtsSession()
        self.usage = TtsUsage()
        self.control = ControlBudget.from_settings()
        request_id_var.set(self.session.stream_request_id)
        self.open_stream()
        try:
            if settings.TTS_AUTH_REQUIRED:
                self.usage.admission = await admit(self.scope, endpoint="tts")
        except AdmissionDenied as denied:
            self.usage.known_key = denied.key  # its refusal is the key's usage
            await self.fail(denial_fail(denied))
            return
        self.ticker.start()  # accounts E6
        self.timers.arm("request", settings.TTS_REQUEST_TIMEOUT_S)

    # The teardown's TTS steps (W10, Z2, Z3): the base's ``end_stream`` runs them once.

    def mark_closed(self) -> None:
        """The stream has ended."""
        self.session.state = STREAM_STATES.move(self.session.state, StreamState.CLOSED)

    def record_steps(
        self, status: TerminalStatus, error_code: str, close_code: int | None
    ) -> list[ReleaseStep]:
        """The active request ends with the stream (a client close cancels it, W10), then
        the stream's own record."""
        steps: list[ReleaseStep] = []
        if self.session.busy:
            end = partial(self.end_request, status, error_code=error_code)
            steps.append(partial(end, close_code=close_code))
        finish = partial(self.usage.finish, status=status, error_code=error_code)
        return [*steps, partial(finish, close_code=close_code)]

    async def release_admission(self) -> None:
        """The lease goes back after the record (accounts.metering)."""
        await self.usage.release()

    async def send_failure(self, failure: Failure) -> None:
        """The boundary's error event (§6, fatal): INTERNAL_ERROR for a bug,
        STREAMING_OVERLOADED with a retry hint for an outage."""
        rid = self.session.current_request_id()
        await self.emit(failure_error(failure, rid))

    def refusal(self, message: str) -> dict[str, Any]:
        """§6 STREAMING_OVERLOADED with a retry hint, for a socket refused at once."""
        event = failure_error("service_unavailable", str(uuid.uuid4()))
        return server_message(dataclasses.replace(event, message=message))

    def closed(self) -> bool:
        """True once the stream has ended (or before it began)."""
        return not self.opened or self.session.closed

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        """Apply one client message (``tts.steps.message`` parses it, once)."""
        if self.session.closed:
            return
        outs = steps.message(self.session, self.control, text_data, bytes_data)
        await self.perform(outs)

    @property
    def active(self) -> ActiveRequest:
        """The current request (callers check ``session.busy`` first)."""
        assert self.session.active is not None
        return self.session.active

    # One request: start, acceptance, end.

    async def start(self, req: TtsRequest) -> None:
        """L1 steps 4–8: K4's token, the shared start, K2–K3, the record, the submission."""
        started = await start_on_stream(self.session, self.usage, req)
        if isinstance(started, TtsFail):
            await self.fail(started)
            return
        plan, self.plan = started.plan, started.plan
        # §9.2's input state machine, for an incremental request only.
        self.input = IncrementalInput(started.active) if req.incremental else None
        self.timers.disarm("request", "idle")
        await self.release_link()  # L1 step 8: admission at a worker (Q2–Q4)
        link = self.new_link(**link_options())
        outcome = await link.submit(plan.first)
        await self.on_outcome(outcome)

    async def on_outcome(self, outcome: Outcome | None) -> None:
        """Act on what the worker link decided."""
        if outcome is None:
            return
        if not self.session.busy:
            await self.release_link()  # the request ended first: cancel its job (Q4)
        elif outcome is Outcome.ACCEPTED:
            await self.job_accepted()
        else:
            code, message, retry = outcome_error(outcome)
            await self.fail(TtsFail(code, message, retry_after_ms=retry))

    async def job_accepted(self) -> None:
        """E1: header (and the WAV header frame, E6) once a worker holds the job."""
        active, link = self.active, self.link
        assert link is not None
        try:
            await self.usage.ready()  # U1: committed before the first binary frame
        except AdmissionDenied as denied:
            await self.fail(denial_fail(denied, fatal=True))
            return
        await link.send(TtsAck(job_id=link.job_id, seq=-1))  # confirm (Z3)
        active.state = REQUEST_STATES.move(active.state, RequestState.STREAMING)
        await self.perform(forwarding.header(active, link.model_version))
        if self.input is not None:
            await self.perform(self.input.accepted())

    async def end_request(
        self,
        status: TerminalStatus,
        *,
        error_code: str = "",
        close_code: int | None = None,
    ) -> dict[str, Any]:
        """End the active request: stop its job, finish its usage record (U3, E5, Z2).

        Returns the ``complete`` metrics, whose timing the record carries. When the stream
        ends with a request that did not complete, what still waits in the write buffer
        never reaches the client, and is not billed (docs/accounting.md).
        """
        active = self.active
        self.session.end_request()
        self.timers.disarm("buffer", "input", "sent")
        await self.release_link()
        body = active.complete_metrics(
            cancelled=status == "cancelled", engine=active.engine
        )
        unsent = 0 if close_code is None or status == "completed" else self.unsent()
        await self.usage.finish(
            status=status,
            error_code=error_code,
            close_code=close_code,
            unsent=unsent,
            **active.usage_timing(body),
        )
        logger.info("tts request %s %s", active.request_id, status)
        return body

    async def complete(self, *, cancelled: bool) -> None:
        """E3/Z1: complete (after a header, always), then close 1000 unless keep-alive (W9,
        K1); a keep-alive stream of a stopping gateway closes 1001 (W12)."""
        active, plan = self.active, self.plan
        assert plan is not None
        await self.release_link()  # stops the worker job at once (Z2)
        if active.state is RequestState.SUBMITTING:
            with contextlib.suppress(AdmissionDenied):  # no audio follows either way
                await self.usage.ready()
            await self.perform(forwarding.header(active, plan.info.model_version))
        if active.request.timestamps and active.open_segment is not None:
            await self.emit(active.segment_end_event(active.open_segment))
        closing = self.session.closing_code(draining=self.draining)
        status: TerminalStatus = "cancelled" if cancelled else "completed"
        body = await self.end_request(status, close_code=closing)
        if body["rtf"]:
            metrics.RTF.labels("tts").observe(body["rtf"])
        await self.emit(Complete(request_id=active.request_id, metrics=body))
        if closing is None:
            self.timers.arm("idle", steps.idle_timeout_s())
        else:
            await self.close_stream(closing, "cancelled")

    # Worker replies and timers (each a separately dispatched message, Q5).

    async def gpu_tts_chunk(self, message: dict[str, Any]) -> None:
        """Handle gpu.tts.chunk, gpu.tts.flushed and gpu.tts.done of the job now streaming:
        frames, flush marks and the end (``tts.forwarding.audio``)."""
        if self.link is None or not self.link.touch(message) or not self.session.busy:
            return
        if self.active.state is RequestState.STREAMING:
            await self.perform(forwarding.audio(self.active, message))

    gpu_tts_flushed = gpu_tts_done = gpu_tts_chunk

    async def gpu_job_failed(self, message: dict[str, Any]) -> None:
        """Handle gpu.job.failed: the request ends with INTERNAL_ERROR."""
        if self.link is None or not self.link.touch(message) or not self.session.busy:
            return
        failed = JobFailed.from_message(message)
        logger.warning(
            "tts request %s: worker failed (%s)", self.active.request_id, failed.code
        )
        await self.fail(TtsFail("INTERNAL_ERROR", "Synthesis failed"))

    async def tick_usage(self) -> Fail | None:
        """accounts E6; an accounts E7 stop ends the stream as its denial."""
        reason = await self.usage.tick()
        if reason is None:
            return None
        return denial_fail(AdmissionDenied(reason), fatal=True)

    async def on_timer(self, name: str) -> None:
        """One of the consumer's own timers (``tts.steps.timer``)."""
        fired = self.timers.fired(name)
        if fired is not None and not self.session.closed:
            await self.perform(steps.timer(self.session, fired))

    async def on_shutdown(self) -> None:
        """W12: an idle stream closes 1001 now; an active request may run for
        ``TTS_DRAIN_S``, then ends with INTERNAL_ERROR and 1001."""
        if not self.session.busy:
            await self.close_stream(1001, "cancelled")
            return
        self.draining = True
        self.timers.arm("drain", settings.TTS_DRAIN_S)

    # Output: the TTS records (``Arm``, ``Disarm`` and failures are the base's ``perform``'s).

    async def do(self, out: outputs.Out) -> bool:
        """Do one TTS output; False when it ended the request (nothing after it is done)."""
        match out:
            case outputs.Send(event):
                await self.emit(event)
            case outputs.Frame(data, samples, ttfb_s, segment_chars):
                if ttfb_s is not None:
                    metrics.TTFB.labels("tts").observe(ttfb_s)
                await self.send(bytes_data=data)
                self.usage.frame_sent(len(data), samples, segment_chars=segment_chars)
            case outputs.Ack() | outputs.SentTimer():
                full = self.transport_full()
                acks = forwarding.transport(out, self.active, transport_full=full)
                await self.perform(acks)
            case outputs.ToWorker() if not await self.to_worker(out):
                await self.fail(
                    TtsFail("INTERNAL_ERROR", "Synthesis worker unavailable")
                )
                return False
            case outputs.Start(req):
                await self.start(req)
            case outputs.Finish(cancelled):
                await self.complete(cancelled=cancelled)
                return False
            case outputs.Input() | outputs.ClearInput() | outputs.InputTimer() if (
                self.input is not None
            ):
                await self.perform(await self.input.apply(out, self.usage))
        return True

    async def to_worker(self, out: outputs.ToWorker) -> bool:
        """Send one message to the pinned worker; False when a required one failed."""
        link = self.link
        if link is None or link.phase is not Phase.ACCEPTED:
            return not out.required
        return await link.send(out.build(link.job_id)) or not out.required

    def transport_full(self) -> bool:
        """More than ``TTS_SEND_BUFFER_BYTES`` wait unsent in the socket's buffer."""
        return self.unsent() > settings.TTS_SEND_BUFFER_BYTES

    def unsent(self) -> int:
        """Bytes sent to the socket that still wait in its write buffer (0 untold)."""
        probe = self.scope.get("extensions", {}).get(TRANSPORT_EXTENSION)
        return 0 if probe is None else int(probe.buffered())

    async def emit(self, event: ServerEvent) -> None:
        """Send one server event (serialized by ``tts.events.server_message``)."""
        await self.send_json(server_message(event))

    async def fail(self, error: TtsFail) -> None:
        """Send the one error event (§6); end the request, and the stream when fatal."""
        session = self.session
        if session.closed:
            return
        fatal, close = session.error_effect(error)
        rid = error.request_id or session.current_request_id()
        metrics.ERRORS.labels("tts", error.code).inc()
        usage_error = error.usage_error or error.code.lower()
        if session.busy:
            await self.end_request("failed", error_code=usage_error, close_code=close)
        elif error.code != "TIMEOUT" and usage_error not in STREAM_STOPS:
            # A request refused before it began leaves a record (issue 30).
            await self.usage.fail(
                request_id=rid, error_code=usage_error, close_code=close
            )
        await self.emit(outputs.error_event(error, rid, fatal=fatal))
        if close is not None:
            await self.close_stream(close, "cancelled")
        elif self.draining:  # W12: no further request on a stopping gateway
            await self.close_stream(1001, "cancelled")
        elif session.requests_started:
            self.timers.arm("idle", steps.idle_timeout_s())
