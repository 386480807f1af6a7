"""The ``/v1/realtime`` consumer: thin I/O between the client, accounts and a worker session."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from django.conf import settings

from accounts.admission import Admission, admit
from accounts.exceptions import AdmissionDenied
from asr.audio import InputDecoder
from asr.engines.base import MODEL_RATE
from asr.messages import (
    AsrAudio,
    AsrCommit,
    AsrDelta,
    AsrDrop,
    AsrFinal,
    AsrItemOpen,
    AsrOpen,
)
from asr.protocol import (
    CLOSE_CODES,
    ClientEvent,
    ProtocolError,
    decode_audio,
    error_event,
    input_format,
    parse_client_event,
    server_event,
)
from asr.session import AsrSession, AsrState
from veena_site import metrics
from veena_site.consumers import WorkerClientConsumer
from veena_site.contracts import JobFailed
from veena_site.jobclient import Outcome
from veena_site.logs import new_request_id

logger = logging.getLogger(__name__)

CHUNK_SAMPLES = MODEL_RATE // 5  # 200 ms per gpu message (realtime WK-4)
DENIALS = {  # accounts E3 reason → (wire code, error type, message)
    "invalid_api_key": (
        "invalid_api_key",
        "invalid_request_error",
        "Incorrect API key provided.",
    ),
    "origin_not_allowed": (
        "origin_not_allowed",
        "invalid_request_error",
        "Origin not allowed.",
    ),
    "endpoint_not_allowed": (
        "endpoint_not_allowed",
        "invalid_request_error",
        "Endpoint not allowed for this key.",
    ),
    "too_many_streams": (
        "too_many_sessions",
        "rate_limit_exceeded",
        "Too many concurrent realtime sessions.",
    ),
    "rate_limited": (
        "rate_limit_exceeded",
        "rate_limit_exceeded",
        "Rate limit exceeded.",
    ),
    "quota_exceeded": (
        "insufficient_quota",
        "insufficient_quota",
        "You exceeded your current quota.",
    ),
    "limits_unavailable": (
        "service_unavailable",
        "server_error",
        "Service temporarily unavailable.",
    ),
}
OUTCOME_ERRORS = {
    Outcome.OVERLOADED: ("rate_limit_exceeded", "too_many_sessions", 1013),
    Outcome.NOT_LOADED: ("server_error", "engine_unavailable", 1011),
    Outcome.LOST: ("server_error", "engine_unavailable", 1011),
}


class RealtimeConsumer(WorkerClientConsumer):
    """One realtime transcription session (OpenAI dialect)."""

    admission: Admission | None = None

    async def connect(self) -> None:
        """Accept (realtime CN-3/CN-4), admit, then get a worker slot."""
        offered = self.scope.get("subprotocols") or []
        chosen = next(
            (p for p in ("realtime", "openai-beta.realtime-v1") if p in offered), None
        )
        await self.accept(subprotocol=chosen)
        new_request_id()
        self.session = AsrSession(model=settings.ASR_MODEL)
        self.pcm = (
            bytearray()
        )  # model-rate audio of the open item not yet sent to the worker
        self.decoder = InputDecoder("audio/pcm", self.session.input_rate)
        metrics.ACTIVE_STREAMS.labels("asr").inc()
        try:
            self.admission = await admit(self.scope, endpoint="asr")
        except AdmissionDenied as denied:
            code, kind, message = DENIALS.get(denied.reason, DENIALS["invalid_api_key"])
            await self.fail(
                code, message, kind=kind, retry_after_ms=denied.retry_after_ms
            )
            return
        link = self.new_link(
            kind="asr",
            answer_ms=settings.ASR_WORKER_ANSWER_MS,
            wait_ms=settings.ASR_ADMISSION_WAIT_MS,
            stall_s=settings.ASR_WORKER_STALL_S,
        )
        self.idle_task = self.post_later(settings.ASR_IDLE_TIMEOUT_S, "idle")
        self.last_message_at = time.monotonic()

        def build(job_id: str, deadline: float) -> AsrOpen:
            return AsrOpen(
                job_id=job_id,
                reply_channel=self.channel_name,
                deadline=deadline,
                model=self.session.model,
            )

        await self.on_outcome(await link.submit(build))

    async def disconnect(self, code: int) -> None:
        """Cancel the worker job and release the admission on every exit path."""
        metrics.ACTIVE_STREAMS.labels("asr").dec()
        self.session.state = AsrState.CLOSED
        if getattr(self, "idle_task", None) is not None:
            self.idle_task.cancel()
        if self.link is not None:
            await self.link.close()
        if self.admission is not None:
            await self.admission.release()

    def closed(self) -> bool:
        """True once the session has ended."""
        return self.session.state is AsrState.CLOSED

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        """Apply one client event; errors are reported and the session goes on."""
        if self.session.state is not AsrState.OPEN:
            return
        self.last_message_at = time.monotonic()
        if text_data is not None and len(text_data) > settings.ASR_MAX_MESSAGE_BYTES:
            await self.fail("message_too_large", "Message too large.")
            return
        event: ClientEvent | None = None
        try:
            event = parse_client_event(text_data, bytes_data)
            await self.apply(event)
        except ProtocolError as exc:
            await self.send_json(
                error_event(
                    exc.code,
                    exc.message,
                    param=exc.param,
                    client_event_id=event.event_id if event else None,
                )
            )

    async def apply(self, event: ClientEvent) -> None:
        """Dispatch a parsed client event."""
        if event.type in ("session.update", "transcription_session.update"):
            await self.update_session(event)
        elif event.type == "input_audio_buffer.append":
            await self.append(event)
        elif event.type == "input_audio_buffer.commit":
            await self.commit()
        else:
            await self.clear()

    async def update_session(self, event: ClientEvent) -> None:
        """Validate first, then change the input format (STYLE 18)."""
        fmt = input_format(event)
        if fmt is not None and fmt != (
            self.session.input_format,
            self.session.input_rate,
        ):
            self.session.input_format, self.session.input_rate = fmt
            self.decoder = InputDecoder(fmt[0], fmt[1])  # type: ignore[arg-type]
        expires = int(self.session.created_at) + settings.ASR_MAX_SESSION_S
        await self.send_json(
            server_event(
                "session.updated", session=self.session.session_object(expires)
            )
        )

    async def append(self, event: ClientEvent) -> None:
        """Decode and resample off the loop (realtime AR-2), then forward to the worker."""
        payload = decode_audio(event)
        if not payload:
            return
        if self.session.input_format == "audio/pcm" and len(payload) % 2:
            raise ProtocolError(
                "invalid_audio_format", "Odd PCM16 byte count.", "audio"
            )
        pcm16 = await asyncio.to_thread(self.decoder.decode, payload)
        limit = settings.ASR_MAX_BUFFER_S * MODEL_RATE
        if self.session.item_samples + len(pcm16) > limit:
            await self.fail(
                "buffer_overflow",
                "Input audio buffer exceeds the limit; commit more often.",
                kind="server_error",
            )
            return
        self.pcm.extend(pcm16.tobytes())
        await self.flush_audio(final=False)

    async def flush_audio(self, *, final: bool) -> None:
        """Send whole 200 ms chunks (all of it when ``final``) to the worker."""
        assert self.link is not None
        session = self.session
        if not session.item_opened and (self.pcm or final):
            await self.link.send(
                AsrItemOpen(
                    job_id=self.link.job_id,
                    item_seq=session.item_seq,
                    language=session.language,
                    prompt=session.prompt,
                )
            )
            session.item_opened = True
        step = 2 * CHUNK_SAMPLES
        while len(self.pcm) >= step or (final and self.pcm):
            chunk = bytes(self.pcm[:step])
            del self.pcm[:step]
            await self.link.send(
                AsrAudio(
                    job_id=self.link.job_id,
                    item_seq=session.item_seq,
                    offset=session.item_samples,
                    pcm=chunk,
                )
            )
            session.item_samples += len(chunk) // 2

    async def commit(self) -> None:
        """Commit the buffer: committed now, transcript when the worker answers."""
        assert self.link is not None
        buffered = self.session.item_samples + len(self.pcm) // 2
        buffered_ms = buffered * 1000 / MODEL_RATE
        if buffered_ms < settings.ASR_MIN_COMMIT_MS:
            raise ProtocolError(
                "input_audio_buffer_commit_empty",
                "Error committing input audio buffer: buffer too small. Expected at least "
                f"{settings.ASR_MIN_COMMIT_MS}ms of audio, but buffer only has {buffered_ms:.2f}ms of audio.",
            )
        await self.flush_audio(final=True)
        total = self.session.item_samples
        seq, item = self.session.commit()
        await self.link.send(
            AsrCommit(job_id=self.link.job_id, item_seq=seq, total_samples=total)
        )
        await self.send_json(
            server_event(
                "input_audio_buffer.committed",
                item_id=item.item_id,
                previous_item_id=self.session.pending.get(seq - 1, None)
                and self.session.pending[seq - 1].item_id,
            )
        )

    async def clear(self) -> None:
        """Drop the open item's audio."""
        assert self.link is not None
        self.pcm.clear()
        if self.session.item_opened:
            await self.link.send(
                AsrDrop(job_id=self.link.job_id, item_seq=self.session.item_seq)
            )
        self.session.clear()
        await self.send_json(server_event("input_audio_buffer.cleared"))

    # Worker replies.

    async def gpu_asr_delta(self, message: dict[str, Any]) -> None:
        """Handle gpu.asr.delta: forward confirmed words of a committed item."""
        if self.link is None or not self.link.touch(message):
            return
        delta = AsrDelta.from_message(message)
        item = self.session.pending.get(delta.item_seq)
        if item is not None:
            item.emitted += delta.text
            await self.send_delta(item.item_id, delta.text)

    async def gpu_asr_final(self, message: dict[str, Any]) -> None:
        """Handle gpu.asr.final: the remainder as a delta, then completed."""
        if self.link is None or not self.link.touch(message):
            return
        final = AsrFinal.from_message(message)
        item = self.session.pending.pop(final.item_seq, None)
        if item is None:
            return
        if final.text:
            await self.send_delta(item.item_id, final.text)
        transcript = item.emitted + final.text
        metrics.TTFB.labels("asr").observe(time.monotonic() - item.committed_at)
        await self.send_json(
            server_event(
                "conversation.item.input_audio_transcription.completed",
                item_id=item.item_id,
                content_index=0,
                transcript=transcript,
                usage={"type": "duration", "seconds": round(final.audio_ms / 1000, 3)},
            )
        )

    async def gpu_job_failed(self, message: dict[str, Any]) -> None:
        """Handle gpu.job.failed: an item fails alone; a job failure ends the session."""
        if self.link is None or not self.link.touch(message):
            return
        failed = JobFailed.from_message(message)
        item = (
            self.session.pending.pop(failed.item_seq, None)
            if failed.item_seq is not None
            else None
        )
        if item is not None:
            await self.send_json(
                server_event(
                    "conversation.item.input_audio_transcription.failed",
                    item_id=item.item_id,
                    content_index=0,
                    error={
                        "type": "server_error",
                        "code": "inference_failed",
                        "message": "Transcription failed.",
                        "param": None,
                    },
                )
            )
            return
        await self.fail(
            "inference_failed", "Transcription failed.", kind="server_error"
        )

    async def send_delta(self, item_id: str, text: str) -> None:
        """One transcription delta event."""
        await self.send_json(
            server_event(
                "conversation.item.input_audio_transcription.delta",
                item_id=item_id,
                content_index=0,
                delta=text,
            )
        )

    async def on_outcome(self, outcome: Outcome | None) -> None:
        """Session created when a worker accepts; admission failures end the session."""
        if outcome is None or self.closed():
            return
        if outcome is Outcome.ACCEPTED:
            self.session.state = AsrState.OPEN
            metrics.REQUESTS.labels("asr").inc()
            expires = int(self.session.created_at) + settings.ASR_MAX_SESSION_S
            await self.send_json(
                server_event(
                    "session.created", session=self.session.session_object(expires)
                )
            )
            return
        kind, code, close_code = OUTCOME_ERRORS[outcome]
        message = (
            "Transcription engine unavailable."
            if kind == "server_error"
            else ("Too many concurrent realtime sessions. Retry after 1.0 s.")
        )
        retry = 1000 if kind == "rate_limit_exceeded" else None
        await self.fail(
            code, message, kind=kind, close_code=close_code, retry_after_ms=retry
        )

    async def on_timer(self, name: str) -> None:
        """Idle timeout (realtime LM-3)."""
        if name != "idle":
            return
        idle = time.monotonic() - self.last_message_at
        if idle >= settings.ASR_IDLE_TIMEOUT_S:
            await self.fail("idle_timeout", "Session closed after inactivity.")
        else:
            self.idle_task = self.post_later(settings.ASR_IDLE_TIMEOUT_S - idle, "idle")

    async def fail(
        self,
        code: str,
        message: str,
        *,
        kind: str = "invalid_request_error",
        close_code: int | None = None,
        retry_after_ms: int | None = None,
    ) -> None:
        """Send one error event and close; the close reason is the code (realtime LM-7)."""
        if self.closed():
            return
        self.session.state = AsrState.CLOSED
        metrics.ERRORS.labels("asr", code).inc()
        if self.link is not None:
            await self.link.close()
        await self.send_json(
            error_event(code, message, kind=kind, retry_after_ms=retry_after_ms)
        )
        await self.close(code=close_code or CLOSE_CODES.get(code, 1011), reason=code)
