"""One request's way through the TTS consumer (specs/tts-ws.md L1 steps 4–12, §12, Z1–Z2).

Start: validate, resolve, segment, reserve and open the usage record, submit to a worker. Accepted:
the record is committed, then the header. End: stop the job and finish the record once with the
``complete`` metrics (E5); ``complete()`` also sends them.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from django.conf import settings

from accounts.exceptions import AdmissionDenied
from gateway import metrics
from gateway.logs import request_id_var
from tts.incremental import IncrementalInput
from tts.messages import TtsAck, TtsSubmit
from tts.prepare import engine_info, job_submit, prepare_segments, resolve_voice
from tts.protocol import ProtocolError, TtsRequest
from tts.session import ActiveRequest, RequestState
from tts.usage import UsageStatus

if TYPE_CHECKING:
    from tts.consumers import TtsConsumer

logger = logging.getLogger(__name__)


class RequestFlow:
    """Start, acceptance and end of the consumer's requests, one at a time (K2)."""

    def __init__(self, consumer: TtsConsumer) -> None:
        self.consumer = consumer

    async def start(self, req: TtsRequest) -> None:
        """L1 steps 4–8: validate, resolve, segment, meter, submit to a worker."""
        consumer = self.consumer
        request_id = consumer.session.request_id_for(req)
        try:
            active, segments = await self._begin(req, request_id)
        except ProtocolError as exc:
            await consumer.fail(
                exc.code,
                exc.message,
                request_id=request_id,
                keep_alive=req.keep_alive,
                **exc.extra,
            )
            return
        except AdmissionDenied as denied:  # K4: a per-request RPM denial is not fatal
            fatal = False if denied.reason == "rate_limited" else None
            await consumer.deny(denied, request_id=request_id, fatal=fatal)
            return
        consumer.timers.disarm("request", "idle")
        consumer.input = IncrementalInput(consumer)
        request_id_var.set(request_id)
        logger.info("tts request %s: %d chars", request_id, len(req.text))
        metrics.REQUESTS.labels("tts").inc()
        try:
            await consumer.usage.open_request(
                request_id=request_id,
                model=engine_info().model_version,
                text_chars=active.text_chars,
            )
        except AdmissionDenied as denied:  # Q7: refused before any audio
            await consumer.deny(denied)
            return
        await self.submit(active, segments)

    async def _begin(
        self, req: TtsRequest, request_id: str
    ) -> tuple[ActiveRequest, list[dict[str, Any]]]:
        """K4, R5, §7 and K2–K3: everything that may refuse the request before it starts."""
        session = self.consumer.session
        if session.requests_started:
            await self.consumer.usage.take_request_token()
        voice = resolve_voice(req, engine_info())
        segments = [] if req.incremental else await prepare_segments(req)
        if not req.incremental and not segments:
            raise ProtocolError("VALIDATION_ERROR", "Text has no speakable content")
        limits = (settings.TTS_SEGMENT_MIN_CHARS, settings.TTS_SEGMENT_MAX_CHARS)
        active = session.begin(
            req, request_id=request_id, voice=voice, segment_chars=limits
        )
        active.text_chars = len(req.text)
        active.add_segments(
            [(s["seq"], s["char_start"], s["char_end"]) for s in segments]
        )
        return active, segments

    async def submit(
        self, active: ActiveRequest, segments: list[dict[str, Any]]
    ) -> None:
        """L1 step 8: admission at a worker (Q2–Q4); the outcome arrives later."""
        consumer = self.consumer
        await consumer.release_link()
        link = consumer.new_link(
            kind="tts",
            answer_ms=settings.TTS_WORKER_ANSWER_MS,
            wait_ms=settings.TTS_ADMISSION_WAIT_MS,
            stall_s=settings.TTS_WORKER_STALL_S,
        )

        def build(job_id: str, deadline: float) -> TtsSubmit:
            return job_submit(
                job_id=job_id,
                reply_channel=consumer.channel_name,
                deadline=deadline,
                req=active.request,
                request_id=active.request_id,
                voice=active.voice,
                segments=segments,
            )

        await consumer.on_outcome(await link.submit(build))

    async def accepted(self) -> None:
        """E1: header (and the WAV header frame, E6) once a worker holds the job."""
        consumer = self.consumer
        active, link = consumer.active, consumer.link
        assert link is not None
        try:
            await consumer.usage.ready()  # U1: committed before the first binary frame
        except AdmissionDenied as denied:
            await consumer.deny(denied, fatal=True)
            return
        await link.send(TtsAck(job_id=link.job_id, seq=-1))  # confirm (Z3)
        active.state = active.state.advance(RequestState.STREAMING)
        await consumer.output.send_header(active, link.model_version)
        consumer.usage.job_accepted()
        await consumer.input.accepted()

    async def end(
        self,
        status: UsageStatus,
        *,
        error_code: str = "",
        close_code: int | None = None,
    ) -> dict[str, Any]:
        """End the active request: stop its job, finish its usage record (U3, E5, Z2).

        Returns the ``complete`` metrics, whose timing the record carries.
        """
        consumer = self.consumer
        active = consumer.active
        consumer.session.end_request()
        consumer.timers.disarm("buffer", "input", "sent")
        await consumer.release_link()
        cancelled = status == "cancelled"
        body = active.complete_metrics(
            cancelled=cancelled, engine=engine_info().wire_name
        )
        await consumer.usage.finish(
            status=status,
            error_code=error_code,
            close_code=close_code,
            **active.usage_timing(body),
        )
        logger.info("tts request %s %s", active.request_id, status)
        return body

    async def complete(self, *, cancelled: bool) -> None:
        """E3/Z1: complete (after a header, always), then close 1000 unless keep-alive (W9,
        K1); a keep-alive stream of a stopping gateway closes 1001 (W12)."""
        consumer = self.consumer
        active = consumer.active
        await consumer.release_link()  # stops the worker job at once (Z2)
        if active.state is RequestState.SUBMITTING:
            with contextlib.suppress(AdmissionDenied):  # no audio follows either way
                await consumer.usage.ready()
            await consumer.output.send_header(active, engine_info().model_version)
        if active.request.timestamps and active.open_segment is not None:
            await consumer.send_json(active.segment_end_event(active.open_segment))
        closing: int | None = 1000  # W9; K1 keeps the stream open unless W12
        if consumer.session.keep_alive:
            closing = 1001 if consumer.draining else None
        body = await self.end(
            "cancelled" if cancelled else "completed", close_code=closing
        )
        if body["rtf"]:
            metrics.RTF.labels("tts").observe(body["rtf"])
        await consumer.send_json(
            {"event": "complete", "request_id": active.request_id, "metrics": body}
        )
        if closing is None:
            consumer.timers.arm("idle", idle_timeout_s())
        else:
            await consumer.close_stream(closing)


def idle_timeout_s() -> float:
    """K5's idle limit between keep-alive requests (accounts §12 WS_IDLE_TIMEOUT_SECONDS)."""
    return float(getattr(settings, "WS_IDLE_TIMEOUT_SECONDS", 30))
