"""The ``/v1/tts/ws`` consumer: thin I/O between the client, accounts and a worker job."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from django.conf import settings

from accounts.admission import Admission, admit
from accounts.exceptions import AdmissionDenied, MissingApiKey
from tts.audio import wav_stream_header
from tts.engines import ENGINE_INFO
from tts.messages import TtsAck, TtsChunk, TtsDone, TtsSubmit
from tts.protocol import (
    Control,
    ProtocolError,
    TtsRequest,
    error_event,
    parse_client_event,
)
from tts.session import TtsSession, TtsState
from tts.speakers import UnknownSpeaker, resolve_speaker
from tts.text import segment_text
from veena_site import metrics
from veena_site.consumers import WorkerClientConsumer
from veena_site.contracts import JobFailed
from veena_site.jobclient import Outcome
from veena_site.logs import request_id_var

logger = logging.getLogger(__name__)

ACK_EVERY = 8
DENIALS = {
    "invalid_api_key": ("AUTH_FAILED", "Invalid API key"),
    "origin_not_allowed": ("AUTH_FAILED", "Origin not allowed"),
    "endpoint_not_allowed": ("AUTH_FAILED", "Endpoint not allowed for this key"),
    "rate_limited": ("RATE_LIMIT_EXCEEDED", "Rate limit exceeded."),
    "too_many_streams": ("RATE_LIMIT_EXCEEDED", "Too many concurrent streams."),
    "quota_exceeded": ("QUOTA_EXCEEDED", "Quota exceeded"),
    "limits_unavailable": (
        "STREAMING_OVERLOADED",
        "Streaming capacity exhausted. Retry shortly.",
    ),
}
OUTCOME_ERRORS = {
    Outcome.OVERLOADED: (
        "STREAMING_OVERLOADED",
        "Streaming capacity exhausted. Retry shortly.",
    ),
    Outcome.NOT_LOADED: ("MODEL_NOT_LOADED", "TTS model not initialized"),
    Outcome.LOST: ("MODEL_NOT_LOADED", "synthesis worker stopped responding"),
}


class TtsConsumer(WorkerClientConsumer):
    """One TTS stream: admission, one request, audio forwarding, cancel and ping."""

    admission: Admission | None = None

    async def connect(self) -> None:
        """Accept first (tts W5), then admit; a denial is one error and a close."""
        offered = self.scope.get("subprotocols") or []
        await self.accept(subprotocol="veena-tts" if "veena-tts" in offered else None)
        self.session = TtsSession(stream_request_id=str(uuid.uuid4()))
        request_id_var.set(self.session.stream_request_id)
        metrics.ACTIVE_STREAMS.labels("tts").inc()
        try:
            if settings.TTS_AUTH_REQUIRED:
                self.admission = await admit(self.scope, endpoint="tts")
        except AdmissionDenied as denied:
            code, message = DENIALS.get(
                denied.reason, ("AUTH_FAILED", "Invalid API key")
            )
            if isinstance(denied, MissingApiKey):
                message = "API key required"
            await self.fail(code, message, retry_after_ms=denied.retry_after_ms)
            return
        self.session.timeout_task = self.post_later(
            settings.TTS_REQUEST_TIMEOUT_S, "request"
        )

    async def disconnect(self, code: int) -> None:
        """Release the worker job and the admission on every exit path (tts Z3)."""
        metrics.ACTIVE_STREAMS.labels("tts").dec()
        self.session.state = TtsState.CLOSED
        if self.session.timeout_task is not None:
            self.session.timeout_task.cancel()
        if self.link is not None:
            await self.link.close()
        if self.admission is not None:
            await self.admission.release()

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        """Parse one client message and apply it to the stream."""
        if self.session.state is TtsState.CLOSED:
            return
        if (
            text_data is not None
            and len(text_data.encode()) > settings.TTS_MAX_MESSAGE_BYTES
        ):
            await self.fail("VALIDATION_ERROR", "Message too large", close_code=1009)
            return
        active = self.session.state is not TtsState.IDLE
        try:
            if text_data is None:
                raise ProtocolError("INVALID_JSON", "Invalid JSON: binary message")
            event = parse_client_event(text_data)
        except ProtocolError as exc:
            if active:
                await self.warn(
                    "IGNORED_MESSAGE", "Message ignored while a request is active"
                )
            else:
                await self.fail(exc.code, exc.message, close_code=exc.close_code)
            return
        if isinstance(event, Control):
            await self.on_control(event)
        elif active:
            await self.warn("IGNORED_MESSAGE", "A request is already active")
        else:
            await self.start_request(event)

    async def on_control(self, event: Control) -> None:
        """Answer ping; cancel the active request; warn on anything else."""
        if event.event == "ping":
            await self.send_json({"event": "pong"})
        elif event.event in ("cancel", "clear"):
            rid = self.session.request_id
            if self.session.state is TtsState.IDLE or event.request_id not in (
                None,
                rid,
            ):
                await self.warn(
                    "NOT_ACTIVE", "No such active request", event.request_id
                )
            else:
                await self.finish(cancelled=True)
        else:
            await self.warn("IGNORED_MESSAGE", f"Unknown event '{event.event[:40]}'")

    async def start_request(self, req: TtsRequest) -> None:
        """Resolve the speaker, segment, and submit the job to a worker."""
        info = ENGINE_INFO[settings.TTS_ENGINE]
        session = self.session
        session.begin(req)
        try:
            voice = resolve_speaker(
                req.speaker, engine=settings.TTS_ENGINE, voices=info.voices
            )
        except UnknownSpeaker as exc:
            message = f"Unknown speaker '{exc.name[:64]}'. Valid speakers: {', '.join(exc.valid)}"
            await self.fail("VALIDATION_ERROR", message, valid_speakers=exc.valid)
            return
        session.voice = voice
        metrics.REQUESTS.labels("tts").inc()
        segments = segment_text(req.text, chunking=req.chunking)
        payload = [
            {
                "seq": s.seq,
                "text": s.text_of(req.text),
                "char_start": s.char_start,
                "char_end": s.char_end,
            }
            for s in segments
        ]
        link = self.new_link(
            kind="tts",
            answer_ms=settings.TTS_WORKER_ANSWER_MS,
            wait_ms=settings.TTS_ADMISSION_WAIT_MS,
            stall_s=settings.TTS_WORKER_STALL_S,
        )

        def build(job_id: str, deadline: float) -> TtsSubmit:
            return TtsSubmit(
                job_id=job_id,
                reply_channel=self.channel_name,
                deadline=deadline,
                voice=voice,
                segments=payload,
                format=req.format,
                sample_rate=req.sample_rate,
                speed=req.speed,
                seed=req.seed,
                temperature=req.temperature,
                top_k=req.top_k,
                top_p=req.top_p,
                max_tokens=req.max_tokens,
                repetition_penalty=req.repetition_penalty,
            )

        await self.on_outcome(await link.submit(build))

    # Worker replies and timers (each a separately dispatched message, tts Q5).

    async def gpu_job_failed(self, message: dict[str, Any]) -> None:
        """Handle gpu.job.failed: the request ends with INTERNAL_ERROR."""
        if self.link is None or not self.link.touch(message):
            return
        failed = JobFailed.from_message(message)
        logger.warning(
            "tts request %s: worker failed (%s)", self.session.request_id, failed.code
        )
        await self.fail("INTERNAL_ERROR", "Synthesis failed")

    async def gpu_tts_chunk(self, message: dict[str, Any]) -> None:
        """Handle gpu.tts.chunk: forward one audio frame, with progress and acks."""
        if self.link is None or not self.link.touch(message):
            return
        chunk = TtsChunk.from_message(message)
        session = self.session
        if chunk.seq != session.next_chunk_seq:
            logger.error(
                "tts request %s: chunk gap at %d", session.request_id, chunk.seq
            )
            await self.fail("INTERNAL_ERROR", "Audio stream interrupted")
            return
        session.next_chunk_seq += 1
        if session.first_audio_at is None:
            session.first_audio_at = time.monotonic()
            metrics.TTFB.labels("tts").observe(session.first_audio_at - session.t0)
        await self.send_frame(chunk.data, samples=chunk.samples)
        if session.next_chunk_seq % ACK_EVERY == 0:
            await self.link.send(TtsAck(job_id=chunk.job_id, seq=chunk.seq))

    async def gpu_tts_done(self, message: dict[str, Any]) -> None:
        """Handle gpu.tts.done: send complete and close."""
        if self.link is None or not self.link.touch(message):
            return
        done = TtsDone.from_message(message)
        if done.chunks != self.session.next_chunk_seq:
            await self.fail("INTERNAL_ERROR", "Audio stream interrupted")
            return
        await self.finish(cancelled=False)

    def closed(self) -> bool:
        """True once the stream has ended."""
        return self.session.state is TtsState.CLOSED

    async def on_timer(self, name: str) -> None:
        """The request timeout (tts W8): only while no request has arrived."""
        if name == "request" and self.session.state is TtsState.IDLE:
            await self.fail(
                "TIMEOUT",
                f"No request received within {settings.TTS_REQUEST_TIMEOUT_S:g} seconds",
            )

    # Output.

    async def on_outcome(self, outcome: Outcome | None) -> None:
        """Act on what the worker link decided."""
        if outcome is None or self.session.state is TtsState.CLOSED:
            return
        if outcome is Outcome.ACCEPTED:
            await self.send_header()
            return
        code, message = OUTCOME_ERRORS[outcome]
        retry = (
            settings.TTS_OVERLOAD_RETRY_MS if code == "STREAMING_OVERLOADED" else None
        )
        await self.fail(code, message, retry_after_ms=retry)

    async def send_header(self) -> None:
        """Send the header event and, for WAV, the 44-byte streaming header frame."""
        session, req = self.session, self.session.request
        assert req is not None and self.link is not None
        session.state = TtsState.STREAMING
        await self.send_json(
            {
                "event": "header",
                "request_id": session.request_id,
                "sample_rate": req.sample_rate,
                "format": req.format,
                "model_version": self.link.model_version,
                "speaker": session.voice,
                "engine": settings.TTS_ENGINE,
                "encoding": "mulaw" if req.format == "mulaw" else "pcm_s16le",
                "channels": 1,
                "protocol_version": 2,
            }
        )
        if req.format == "wav":
            await self.send_frame(wav_stream_header(req.sample_rate), samples=0)

    async def send_frame(self, data: bytes, *, samples: int) -> None:
        """Send one binary frame and a progress event after every N-th frame (tts E2)."""
        session = self.session
        await self.send(bytes_data=data)
        session.count_frame(len(data), samples)
        if session.chunks_sent % settings.TTS_PROGRESS_EVERY == 0:
            await self.send_json(session.progress_event())

    async def finish(self, *, cancelled: bool) -> None:
        """Send complete (tts E3) and close 1000; a cancel stops the worker job first."""
        if self.link is not None:
            await self.link.close()
        session = self.session
        if session.state is TtsState.SUBMITTING and cancelled:
            await self.send_header_for_cancel()
        metrics_ = session.complete_metrics(
            cancelled=cancelled, engine=settings.TTS_ENGINE
        )
        if metrics_["rtf"]:
            metrics.RTF.labels("tts").observe(metrics_["rtf"])
        session.state = TtsState.CLOSED
        await self.send_json(
            {"event": "complete", "request_id": session.request_id, "metrics": metrics_}
        )
        await self.close(code=1000)

    async def send_header_for_cancel(self) -> None:
        """A cancel read before the header still gets header then complete (tts Z1)."""
        req = self.session.request
        assert req is not None
        info = ENGINE_INFO[settings.TTS_ENGINE]
        await self.send_json(
            {
                "event": "header",
                "request_id": self.session.request_id,
                "sample_rate": req.sample_rate,
                "format": req.format,
                "model_version": info.model_version,
            }
        )

    async def fail(
        self, code: str, message: str, *, close_code: int | None = None, **extra: Any
    ) -> None:
        """Send the one error event and close with the code's close code (tts §6)."""
        if self.session.state is TtsState.CLOSED:
            return
        self.session.state = TtsState.CLOSED
        metrics.ERRORS.labels("tts", code).inc()
        if self.link is not None:
            await self.link.close()
        await self.send_json(
            error_event(code, message[:500], self.session.request_id, **extra)
        )
        await self.close(code=close_code or ProtocolError(code, message).close_code)

    async def warn(
        self, code: str, message: str, request_id: str | None = None
    ) -> None:
        """Send a warning that never ends anything (tts E4)."""
        event = {"event": "warning", "code": code, "message": message}
        if request_id is not None:
            event["request_id"] = request_id
        await self.send_json(event)
