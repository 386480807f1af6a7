"""The ``/v1/realtime`` consumer: thin I/O between the client, accounts and a worker job.

Built on the skeleton both consumers share (``gateway.link.consumers``): each frame is parsed
once into a typed event and applied by ``asr.steps.ClientSteps``; worker replies
(``gpu.*``) and timers (``timer.*``, the usage tick included) are separate dispatched messages
(AR-3) that the session (``asr.session``) answers. Both yield outputs; the base's ``perform``
carries them out, this consumer's ``do`` the ASR records: wire events (``asr.events``), worker
messages (``asr.outbox``), errors.
Usage is metered through ``asr.usage``: one record per connection, before ``session.created``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from functools import partial
from typing import Any, ClassVar, Unpack

from django.conf import settings

from accounts.admission import Admission, admit
from accounts.exceptions import AdmissionDenied
from accounts.metering import refuse
from asr import connection, errors, events
from asr.config import ConfigError
from asr.connection import EarlyFrames
from asr.errors import RealtimeFail, Reject
from asr.events import ClientOut, ErrorFields, SessionCreated
from asr.messages import AsrDelta, AsrFinal, AsrOpen, AsrResync
from asr.outbox import RETRY_S, FlushResult, WorkerOutbox
from asr.outputs import Completed, Overflow, WorkerOut
from asr.protocol import Dialect
from asr.session import AsrState, RealtimeSession
from asr.steps import Action, ClientSteps
from asr.usage import RealtimeUsage
from gateway import metrics
from gateway.contracts import JobFailed
from gateway.link.boundary import ReleaseStep
from gateway.link.consumers import WorkerClientConsumer
from gateway.link.jobclient import Outcome
from gateway.link.outputs import Fail, TerminalStatus
from gateway.link.states import Transitions
from gateway.logs import new_request_id
from gateway.outages import Failure
from gateway.server import lifecycle

logger = logging.getLogger(__name__)

# AsrState's moves: ending twice is harmless (``fail`` marks the session closed before its
# error goes out, the teardown again after it).
ASR_STATES = Transitions(
    {
        AsrState.ADMITTING: {AsrState.OPEN, AsrState.CLOSED},
        AsrState.OPEN: {AsrState.CLOSED},
        AsrState.CLOSED: {AsrState.CLOSED},
    }
)


class RealtimeConsumer(WorkerClientConsumer):
    """One realtime transcription session, OpenAI or vLLM dialect."""

    endpoint = "asr"
    disconnect_status: ClassVar[TerminalStatus] = "completed"  # accounts U9
    session: RealtimeSession
    admission: Admission | None = None
    usage: RealtimeUsage | None = None
    steps: ClientSteps

    async def connect(self) -> None:
        """Accept (CN-3, CN-4), admit (AU-4), then ask a worker for a slot (WK-2)."""
        await self.accept(subprotocol=connection.subprotocol(self.scope))
        new_request_id()
        accepted_at = time.time()
        self.session = connection.new_session(self.scope, accepted_at=accepted_at)
        self.early = EarlyFrames(settings.ASR_MAX_EARLY_BYTES)
        self.outbox = WorkerOutbox(stall_s=settings.ASR_WORKER_STALL_S)
        self.last_message_at = time.monotonic()
        self.open_stream()
        try:
            self.admission = await self.admit()
        except AdmissionDenied as denied:
            fail = errors.denial(denied.reason, denied.retry_after_ms, denied.cap)
            await self.fail(fail)
            await refuse(
                denied.key,
                endpoint="asr",
                request_id=self.session.session_id,
                error_code=denied.reason,
                close_code=fail.close,
            )
            return
        self.usage = RealtimeUsage.start(
            self.admission, accepted_at=accepted_at, request_id=self.session.session_id
        )
        try:
            connection.apply_secret_session(self.session, self.admission)
        except ConfigError:  # the served model changed since the secret was minted
            logger.info("client secret's session no longer valid")
            # A refusal: its record holds the code (issue 30).
            await self.fail(RealtimeFail("invalid_session"))
            return
        self.session.expires_at = connection.expires_at(accepted_at, self.admission)
        self.steps = ClientSteps(self.session, self.usage)
        await self.submit()

    async def admit(self) -> Admission | None:
        """accounts E1 for this stream; None would meter to the ``anonymous`` key."""
        return await admit(self.scope, endpoint="asr")

    async def submit(self) -> None:
        """Send asr.job.open through a fresh link; the answer arrives as a message.

        The job id is the accounts stream id (WK-1); a failover's job gets a new name.
        """
        assert self.usage is not None
        job_id = self.outbox.job_id(str(self.usage.stream_id))
        link = self.new_link(
            kind="asr",
            answer_ms=settings.ASR_WORKER_ANSWER_MS,
            wait_ms=settings.ASR_ADMISSION_WAIT_MS,
            stall_s=settings.ASR_WORKER_STALL_S,
        )
        first = AsrOpen.first(settings.ASR_MODEL)
        await self.on_outcome(await link.submit(first, job_id=job_id))

    # Client frames.

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        """Handle one frame; frames received during admission wait for session.created."""
        if self.session.state is AsrState.CLOSED:
            return
        if self.session.state is AsrState.ADMITTING:
            if not self.early.hold(text_data, bytes_data):  # issue 9: a few MB
                await self.fail(RealtimeFail("buffer_overflow"))
            return
        await self.handle_frame(text_data, bytes_data)

    async def handle_frame(self, text: str | None, data: bytes | None) -> None:
        """LM-1, then the frame's outputs (parse, budget, dialect, handler: AI-1, DI-2)."""
        self.last_message_at = time.monotonic()
        version = self.link.model_version if self.link else ""
        actions = await self.steps.message(text, data, version=version)
        await self.perform(actions)

    # Worker replies (AR-3: each is its own dispatched message).

    async def gpu_asr_delta(self, message: dict[str, Any]) -> None:
        """Handle gpu.asr.delta: confirmed words of an item."""
        if self.alive(message):
            await self.perform(self.session.on_delta(AsrDelta.from_message(message)))

    async def gpu_asr_final(self, message: dict[str, Any]) -> None:
        """Handle gpu.asr.final: the remainder, completed, item done."""
        if self.alive(message):
            await self.perform(self.session.on_final(AsrFinal.from_message(message)))

    async def gpu_asr_resync(self, message: dict[str, Any]) -> None:
        """Handle gpu.asr.resync: resend an item's audio from what the worker has."""
        if self.alive(message):
            await self.perform(self.session.on_resync(AsrResync.from_message(message)))

    async def gpu_job_failed(self, message: dict[str, Any]) -> None:
        """Handle gpu.job.failed: a final failure fails the item; others end the session."""
        if not self.alive(message):
            return
        failed = JobFailed.from_message(message)
        if (outs := self.session.on_failed(failed)) is not None:
            await self.perform(outs)
        elif failed.code == "worker_shutdown":
            await self.failover()
        else:
            await self.fail(RealtimeFail("inference_failed"))

    async def gpu_job_heartbeat(self, message: dict[str, Any]) -> None:
        """Handle gpu.job.heartbeat: the pinned worker is alive."""
        self.alive(message)

    def alive(self, message: dict[str, Any]) -> bool:
        """The reply is from the pinned worker of an open session (it also feeds WK-7)."""
        return not self.closed() and self.link is not None and self.link.touch(message)

    # Outputs: the ASR records (failures are the base's ``perform``'s).

    async def do(self, out: Action) -> bool:
        """Do one ASR output; False when it ended the session."""
        if isinstance(out, Overflow):
            text = errors.message("pending_overflow") if out.pending else None
            await self.fail(RealtimeFail("buffer_overflow", message=text))
            return False
        if isinstance(out, Reject):
            text, event_id = out.message, out.event_id
            await self.send_error(out.code, text, param=out.param, event_id=event_id)
        elif isinstance(out, WorkerOut):
            if self.link is not None:
                self.outbox.put(out, self.link.job_id)
        elif not isinstance(out, RealtimeFail):
            await self.to_client(out)
        return True

    async def performed(self) -> None:
        """The queue for the worker goes out after each list of outputs."""
        await self.pump()

    async def to_client(self, out: ClientOut) -> None:
        """Send an output's wire events; a completed item is metered (MT-4)."""
        if isinstance(out, Completed) and self.usage is not None:
            self.usage.completed(out)
        for event in events.server_events(out, self.session):
            await self.send_json(event)

    async def pump(self) -> None:
        """Send queued messages; ChannelFull retries until the stall limit (WK-7)."""
        if self.link is None:
            return
        flushed = await self.outbox.flush(self.link)
        if flushed is FlushResult.STALLED:
            await self.failover()
        elif flushed is FlushResult.RETRY and not self.timers.armed("pump"):
            self.timers.arm("pump", RETRY_S)

    async def send_error(
        self,
        code: str,
        text: str,
        *,
        openai: bool = False,
        **fields: Unpack[ErrorFields],
    ) -> None:
        """The one error sender: OpenAI envelope (ER-1) or vLLM's flat one (VL-1)."""
        openai = openai or self.session.dialect is not Dialect.VLLM
        await self.send_json(events.error(code, text, openai=openai, **fields))

    # Admission, failover, timers.

    async def on_outcome(self, outcome: Outcome | None) -> None:
        """Accepted → session.created (or replay after failover); else deny or fail."""
        if outcome is None or self.closed():
            return
        if outcome is Outcome.ACCEPTED:
            if self.outbox.failing_over:
                self.outbox.failing_over = False
                sid = self.session.session_id
                logger.info("asr session %s: replaying to a new worker", sid)
                await self.perform(self.session.replay())
            else:
                await self.open_session()
            return
        if outcome is Outcome.LOST:  # the link confirmed the silence after its queue
            await self.failover()
        else:
            failing_over = self.outbox.failing_over
            await self.fail(errors.outcome_error(outcome, failing_over=failing_over))

    async def open_session(self) -> None:
        """AU-4, CN-7: usage record, session.created, timers, then the early frames."""
        assert self.usage is not None
        version = self.link.model_version if self.link is not None else ""
        try:  # MT-1: the record is committed before session.created (accounts U2)
            await self.usage.open(model=version or settings.ASR_MODEL)
        except AdmissionDenied as denied:  # usage_unavailable: serve none (accounts U2)
            await self.fail(replace(errors.stop(denied.reason), admission=True))
            return
        self.enter(AsrState.OPEN)
        metrics.REQUESTS.labels("asr").inc()
        await self.to_client(SessionCreated())
        if settings.ASR_IDLE_TIMEOUT_S:
            self.timers.arm("idle", settings.ASR_IDLE_TIMEOUT_S)
        self.timers.arm("expire", max(0.0, self.session.expires_at - time.time()))
        self.ticker.start()  # accounts E6
        for text, data in self.early.take():
            if self.closed():
                return
            await self.handle_frame(text, data)

    async def failover(self) -> None:
        """WK-7: the worker is lost; re-run admission and replay unfinished items."""
        if lifecycle.shutting_down() and not self.closed():
            await self.on_shutdown()  # LM-6: the gateway is going too
            return
        if self.closed() or not self.outbox.fail_over():
            return
        sid = self.session.session_id
        logger.warning("asr session %s: worker lost, failing over", sid)
        if self.link is not None:
            await self.link.close()
        await self.submit()

    async def tick_usage(self) -> Fail | None:
        """accounts E6; an accounts E7 stop ends the session with its wire error (LM-5)."""
        reason = await self.usage.tick() if self.usage is not None else None
        return errors.stop(reason) if reason is not None else None

    async def on_timer(self, name: str) -> None:
        """Idle (LM-3), expiry (LM-4), the outbox retry."""
        timer = self.timers.fired(name)
        if timer == "pump":
            await self.pump()
        elif timer == "expire":
            why = connection.expiry_reason(self.admission)
            await self.fail(RealtimeFail("session_expired", reason=why))
        elif timer == "idle":
            idle = time.monotonic() - self.last_message_at
            if idle >= settings.ASR_IDLE_TIMEOUT_S:
                await self.fail(RealtimeFail("idle_timeout"))
            else:
                self.timers.arm("idle", settings.ASR_IDLE_TIMEOUT_S - idle)

    # Termination.

    async def fail(self, fail: RealtimeFail) -> None:
        """One error event, then close with the code as reason (ER-2, LM-7); the record
        is finished first (MT-1, U9) with the reason or the wire code as error_code."""
        if self.closed():
            return
        self.enter(AsrState.CLOSED)
        metrics.ERRORS.labels("asr", fail.code).inc()
        await self.send_error(
            fail.code,
            fail.text,
            retry_after_ms=fail.retry_after_ms,
            openai=fail.admission,
        )
        status: TerminalStatus = "completed" if fail.completed else "failed"
        error_code = "" if fail.completed else fail.reason or fail.code
        await self.close_stream(
            fail.close, status, error_code=error_code, reason=fail.code
        )

    async def on_shutdown(self) -> None:
        """LM-6: gateway shutdown is a normal server close (U9), with 1001."""
        await self.close_stream(1001, "completed")

    async def send_failure(self, failure: Failure) -> None:
        """The boundary's error event (``asr.errors.failure_code``)."""
        code = errors.failure_code(failure, vllm=self.session.dialect is Dialect.VLLM)
        self.enter(AsrState.CLOSED)
        await self.send_error(code, errors.message(code))

    def refusal(self, message: str) -> dict[str, Any]:
        """``service_unavailable`` in the OpenAI envelope (AU-4), with a retry hint."""
        retry = errors.DEFAULT_RETRY_MS
        return events.error(
            "service_unavailable", message, openai=True, retry_after_ms=retry
        )

    # The teardown's ASR steps (LM-6, MT-1, U8): the base's ``end_stream`` runs them once.

    def mark_closed(self) -> None:
        """The session has ended; nothing more goes to the worker."""
        self.enter(AsrState.CLOSED)
        self.outbox.clear()

    def record_steps(
        self, status: TerminalStatus, error_code: str, close_code: int | None
    ) -> list[ReleaseStep]:
        """The connection's one record is finished (MT-1, U8, U9)."""
        if self.usage is None:
            return []
        finish = partial(self.usage.finish, status=status, error_code=error_code)
        return [partial(finish, close_code=close_code)]

    async def release_admission(self) -> None:
        """The admission goes back after the record (accounts E5)."""
        if self.usage is not None:
            await self.usage.release()
        logger.info(
            "asr session %s closed: %s to the worker; %s",
            self.session.session_id,
            self.outbox.describe(),
            self.usage.describe() if self.usage is not None else "not admitted",
        )

    def enter(self, state: AsrState) -> None:
        """Move the session to ``state`` (``ASR_STATES`` says where it may go)."""
        self.session.state = ASR_STATES.move(self.session.state, state)

    def closed(self) -> bool:
        """True once the session has ended (or before it began)."""
        return not self.opened or self.session.state is AsrState.CLOSED
