"""``POST /v1/audio/speech``: OpenAI's speech endpoint on the TTS admission, metering and jobs.

The same steps as ``POST /v1/tts`` (``tts.views``): admit, validate, resolve the voice, segment,
reserve the characters and commit the usage record, then one worker job on a private channel
(``tts.client``). Unlike it, the audio is streamed as it is made: the response starts once the
first chunk (the first sentence) is there, so an overloaded or missing worker still gets its
own status; after that a failure ends the body early (``sse``: an ``error`` event). The lease
is held until the body ends.

A format sent whole (``encode.WHOLE_FORMATS``: FLAC, whose header holds the length) is made
to the end first and sent with its true header and ``Content-Length``; a failure on the way
is then an error status, as before the first chunk (docs/audio-formats.md).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    StreamingHttpResponse,
)
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from accounts.exceptions import AdmissionDenied
from accounts.metering import Route
from gateway.logs import request_id_of
from gateway.outages import is_outage, log_failure
from gateway.server.daphne_compat import ABORT_EXTENSION
from openai_rest.encode import CONTENT_TYPES, StreamEncoder
from openai_rest.errors import (
    OpenAiError,
    boundary_error,
    denial_error,
    error_response,
    invalid,
    server_error,
    timeout_error,
)
from openai_rest.speech_request import (
    SPEECH_RATE,
    SpeechRequest,
    parse_speech,
    tts_request,
)
from openai_rest.ticking import ticked
from tts.client import ChannelJob, JobError
from tts.messages import TtsChunk
from tts.protocol import TtsProtocolError
from tts.requests import RequestPlan, admit_rest, start_request
from tts.usage import TtsUsage, UsageStatus

logger = logging.getLogger(__name__)
SSE_DELTA_BYTES = 48 * 1024  # audio per speech.audio.delta event, before base64

_JOB_ERRORS = {  # tts.client JobError code → (status, code, message)
    "STREAMING_OVERLOADED": (
        503,
        "server_overloaded",
        "The engine is currently overloaded, please try again later.",
    ),
    "MODEL_NOT_LOADED": (503, "model_not_loaded", "The model is not loaded yet."),
}


def job_error(error: JobError) -> OpenAiError:
    """A worker outcome of the job as OpenAI's server error."""
    status, code, message = _JOB_ERRORS.get(
        error.code, (500, "internal_error", "Speech synthesis failed.")
    )
    retry = settings.TTS_OVERLOAD_RETRY_MS if status == 503 else None
    return OpenAiError(
        status, message, type_="server_error", code=code, retry_after_ms=retry
    )


@csrf_exempt
@require_POST
async def speech(request: HttpRequest) -> HttpResponseBase:
    """``POST /v1/audio/speech``: audio in ``response_format``, chunked or as SSE."""
    request_id = request_id_of(request)
    usage = TtsUsage(route=Route.SPEECH_REST)
    try:
        return await _start(request, request_id, usage)
    except asyncio.CancelledError:  # the client went away before the body started
        await usage.end(status="cancelled", request_id=request_id)
        raise
    except Exception as exc:  # boundary: one request
        log_failure(logger, "speech request %s failed", request_id)
        answer, failure = boundary_error(exc)
        return await _failed(usage, answer, request_id, failure)


async def _start(
    request: HttpRequest, request_id: str, usage: TtsUsage
) -> HttpResponseBase:
    started = time.monotonic()
    try:
        await admit_rest(request, usage)
        req = parse_speech(_body(request))
        try:
            plan = await start_request(tts_request(req), usage, request_id)
        except TtsProtocolError as exc:
            raise invalid(
                exc.message, param="voice" if "speaker" in exc.message else "input"
            ) from None
        await usage.ready()  # committed before any audio exists
        job = ChannelJob(get_channel_layer())
        chunks = ticked(usage, _chunks(job, plan))
        first = await anext(chunks)  # the first sentence; errors still get a status
    except OpenAiError as error:
        return await _failed(usage, error, request_id, error.code or "invalid_request")
    except AdmissionDenied as denied:
        usage.known_key = denied.key
        return await _failed(usage, denial_error(denied), request_id, denied.reason)
    except JobError as error:
        return await _failed(usage, job_error(error), request_id, error.code.lower())
    except TimeoutError:
        return await _failed(usage, timeout_error(), request_id, "timeout")
    except StopAsyncIteration:  # the job ended without audio
        return await _failed(usage, server_error(), request_id, "internal_error")
    ttfb_ms = round((time.monotonic() - started) * 1000)
    stream = SpeechStream(req, usage, chunks, started=started, ttfb_ms=ttfb_ms)
    stream.segment_chars = {seq: end - start for seq, start, end in plan.spans}
    scope = getattr(request, "scope", {})  # ASGIRequest; a test's WSGI request has none
    stream.abort = scope.get("extensions", {}).get(ABORT_EXTENSION)
    sse = req.stream_format == "sse"
    response: HttpResponseBase
    if stream.encoder.whole and not sse:
        response = await _whole(stream, first, request_id)
        if response.status_code != 200:
            return response
    else:
        response = StreamingHttpResponse(stream.body(first))
    response["Content-Type"] = (
        "text/event-stream" if sse else CONTENT_TYPES[req.response_format]
    )
    response["Cache-Control"] = "no-cache"
    response["x-request-id"] = request_id
    response["X-Sample-Rate"] = str(SPEECH_RATE)
    response["X-Speaker"] = plan.voice
    return response


async def _whole(
    stream: SpeechStream, first: TtsChunk, request_id: str
) -> HttpResponse:
    """A file sent whole, with its length; a failure on the way is an error status. The
    body has finished the record either way (with the status it answers)."""
    try:
        body = b"".join([part async for part in stream.body(first)])
    except Exception:  # boundary: one request, whose record the body ended
        logger.exception("speech request %s failed", request_id)
        return error_response(server_error(), request_id)
    if stream.error is not None:
        return error_response(_stream_error(stream.error), request_id)
    response = HttpResponse(body)
    response["Content-Length"] = str(len(body))
    return response


async def _failed(
    usage: TtsUsage, error: OpenAiError, request_id: str, code: str
) -> HttpResponseBase:
    """End the request as failed with ``code`` and the status sent, and answer."""
    await usage.end(
        status="failed", request_id=request_id, error_code=code, close_code=error.status
    )
    return error_response(error, request_id)


def _body(request: HttpRequest) -> bytes:
    """The raw body; over Django's own cap it is OpenAI's 413."""
    try:
        return request.body
    except RequestDataTooBig:
        raise OpenAiError(
            413, "Request body too large.", code="request_too_large"
        ) from None


async def _chunks(job: ChannelJob, plan: RequestPlan) -> AsyncGenerator[TtsChunk, None]:
    """The job's chunks; closing this closes the job's iterator (which stops the job)."""
    source = job.stream(plan.first, timeout_s=settings.TTS_REST_TIMEOUT_S)
    try:
        async for chunk in source:
            yield chunk
    finally:
        await source.aclose()


class SpeechStream:
    """The response body of one speech request; it finishes the record and the lease.

    A body that cannot finish (the job failed, timed out or was stopped; Redis gone) ends
    with an SSE ``error`` event, or, for raw audio whose 200 is already out, by aborting the
    connection (``abort``, from the server): the client sees the body cut, never a short
    body that looks whole (issue 31).
    """

    abort: Callable[[], None] | None = None

    def __init__(
        self,
        req: SpeechRequest,
        usage: TtsUsage,
        chunks: AsyncGenerator[TtsChunk, None],
        *,
        started: float,
        ttfb_ms: int,
    ) -> None:
        self.req, self.usage, self.chunks = req, usage, chunks
        self.started, self.ttfb_ms = started, ttfb_ms
        self.samples = 0
        self.encoder = StreamEncoder(req.response_format, SPEECH_RATE)
        self.error: Exception | None = None  # what ended the body early
        self.segment_chars: dict[int, int] = {}  # characters of each segment, by seq
        # A whole file leaves at flush: until then its frames are only counted here.
        self.held: list[tuple[int, int]] = []  # (samples, segment characters)

    def frame(self, data: bytes) -> bytes:
        """``data`` as sent: raw, or ``speech.audio.delta`` events of at most
        ``SSE_DELTA_BYTES`` each (a whole file arrives at once)."""
        if self.req.stream_format == "audio" or not data:
            return data
        return b"".join(
            sse(
                {
                    "type": "speech.audio.delta",
                    "audio": base64.b64encode(piece).decode(),
                }
            )
            for piece in (
                data[i : i + SSE_DELTA_BYTES]
                for i in range(0, len(data), SSE_DELTA_BYTES)
            )
        )

    def words(self, chunk: TtsChunk) -> bytes:
        """The chunk's ``speech.audio.words`` event (``word_timestamps``, issue 35)."""
        if not (self.req.word_timestamps and chunk.words):
            return b""
        words = chunk.timed_words(self.samples * 1000 / SPEECH_RATE)
        return sse({"type": "speech.audio.words", "words": words})

    async def body(self, first: TtsChunk) -> AsyncIterator[bytes]:
        """Encode and send every chunk; finish the record once, on every exit."""
        encoder = self.encoder
        status: UsageStatus = "failed"
        code = "internal_error"
        try:
            yield self.words(first) + self.frame(self._count(encoder, first))
            try:
                async for chunk in self.chunks:
                    words = self.words(chunk)
                    if out := self._count(encoder, chunk):
                        yield words + self.frame(out)
                    elif words:
                        yield words
            except Exception as exc:  # boundary: the body, once its 200 is out
                if not isinstance(exc, ENDINGS) and not is_outage(exc):
                    raise
                self.error, code = exc, _error_code(exc)
                logger.warning("speech stream ended early: %s", code)
                if self.req.stream_format == "sse":
                    yield sse(
                        {"type": "error", "error": _stream_error(exc).body()["error"]}
                    )
                elif self.abort is not None and not encoder.whole:
                    self.abort()  # a whole body is answered with an error status
                return
            yield self.frame(self._flushed(encoder))
            if self.req.stream_format == "sse":
                yield sse({"type": "speech.audio.done", "usage": self._usage()})
            status, code = "completed", ""
        except (asyncio.CancelledError, GeneratorExit):
            status, code = "cancelled", ""
            raise
        finally:
            encoder.close()
            await asyncio.shield(self._finish(status, code))

    def _count(self, encoder: StreamEncoder, chunk: TtsChunk) -> bytes:
        """Encode a chunk and count it as sent (the body yields it next); a segment's
        last chunk also bills the segment's characters (docs/accounting.md). A whole
        file's chunks are held: none of its audio leaves before ``flush``."""
        self.samples += chunk.samples
        data = encoder.encode(chunk.data)
        ended = self.segment_chars.get(chunk.segment_seq, 0) if chunk.segment_end else 0
        if encoder.whole:
            self.held.append((chunk.samples, ended))
        else:
            self.usage.frame_sent(len(data), chunk.samples, segment_chars=ended)
        return data

    def _flushed(self, encoder: StreamEncoder) -> bytes:
        """The encoder's last bytes, counted as sent with the held frames (a whole file's
        audio is delivered, and billed, only when it completes)."""
        tail = encoder.flush()
        self.usage.frame_sent(len(tail), 0)
        for samples, chars in self.held:
            self.usage.frame_sent(0, samples, segment_chars=chars)
        self.held.clear()
        return tail

    def _sent_status(self, status: UsageStatus) -> int | None:
        """The HTTP status the client got: 200 once the body began; a whole body that
        did not complete was never sent: its error's status instead, none if cancelled."""
        if status == "completed" or not self.encoder.whole:
            return 200
        if self.req.stream_format == "sse":
            return 200  # the events' 200 went out before the file
        if status == "cancelled":
            return None
        return 500 if self.error is None else _stream_error(self.error).status

    def _usage(self) -> dict[str, Any]:
        chars = len(self.req.input)
        return {
            "input_tokens": chars,
            "output_tokens": 0,
            "total_tokens": chars,
            "characters": chars,
            "audio_seconds": round(self.samples / SPEECH_RATE, 3),
        }

    async def _finish(self, status: UsageStatus, code: str) -> None:
        try:
            await self.chunks.aclose()
        except Exception:  # boundary: the job's iterator; its job is withdrawn
            logger.exception("speech stream: job not closed cleanly")
        seconds = self.samples / SPEECH_RATE
        rtf = round((time.monotonic() - self.started) / seconds, 3) if seconds else None
        try:
            await self.usage.finish(
                status=status,
                error_code=code,
                close_code=self._sent_status(status),
                ttfb_ms=self.ttfb_ms,
                rtf=rtf if status == "completed" else None,
            )
        except Exception:  # boundary: the record (the reaper finalizes it later)
            logger.exception("speech stream: usage record not finalized")
        await self.usage.release()


ENDINGS = (JobError, TimeoutError, AdmissionDenied)  # how a job's stream ends early


def _error_code(exc: BaseException) -> str:
    if isinstance(exc, AdmissionDenied):
        return exc.reason
    if isinstance(exc, JobError):
        return exc.code.lower()
    if is_outage(exc):
        return "service_unavailable"
    return "timeout"


def _stream_error(exc: BaseException) -> OpenAiError:
    if isinstance(exc, AdmissionDenied):
        return denial_error(exc)
    if is_outage(exc):
        return boundary_error(exc)[0]
    if isinstance(exc, JobError):
        return job_error(exc)
    return timeout_error()


def sse(event: dict[str, Any]) -> bytes:
    """One server-sent event with a JSON ``data`` line (no ``event:`` line, as OpenAI)."""
    return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"
