"""REST endpoints of the TTS app: ``POST /v1/tts`` (H1–H5), ``GET /v1/tts/speakers`` (H6–H7).

The view awaits its job directly, on a private channel (``tts.client``): unlike a consumer it has
no dispatch loop that a wait could block.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import math
import time
from collections.abc import AsyncIterator
from typing import IO, Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    JsonResponse,
    StreamingHttpResponse,
)
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from accounts.admission import KeyPrincipal, authenticate_request
from accounts.exceptions import AdmissionDenied
from accounts.metering import Route
from gateway.logs import request_id_of
from gateway.outages import Failure, is_outage, log_failure
from tts.audio import WAV_HEADER_BYTES, wav_file_header
from tts.client import ChannelJob, JobAudio, JobError
from tts.errors import denial_error, failure_error
from tts.protocol import HTTP_STATUS, TtsProtocolError, TtsRequest, parse_rest_body
from tts.requests import RequestPlan, admit_rest, start_request
from tts.speakers import voices_listing
from tts.usage import TtsUsage, while_ticking

logger = logging.getLogger(__name__)

CONTENT_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/pcm;rate={rate};channels=1;encoding=s16le",
    "mulaw": "audio/basic",
}
READ_BYTES = 256 * 1024


class RestError(Exception):
    """A §6 error for an HTTP client (H4)."""

    def __init__(
        self,
        code: str,
        message: str,
        retry_after_ms: int | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.retry_after_ms = code, message, retry_after_ms
        self.status = status or HTTP_STATUS[code]


def error_response(error: RestError, request_id: str) -> JsonResponse:
    """H4: the error body, §6 status, and ``Retry-After`` on 429 and 503."""
    body: dict[str, Any] = {
        "code": error.code,
        "message": error.message[:500],
        "request_id": request_id,
    }
    if error.retry_after_ms is not None:
        body["retry_after_ms"] = error.retry_after_ms
    status = error.status
    response = JsonResponse({"error": body}, status=status)
    if status in (429, 503):
        retry = error.retry_after_ms or settings.TTS_OVERLOAD_RETRY_MS
        response["Retry-After"] = str(math.ceil(retry / 1000))
    response["X-Request-Id"] = request_id
    return response


def authenticate(request: HttpRequest) -> KeyPrincipal | None:
    """H6: the W2 sources except the subprotocol; Origin checked only when sent (sync)."""
    if not settings.TTS_AUTH_REQUIRED:
        return None
    try:
        principal = authenticate_request(request, endpoint="tts")
    except AdmissionDenied as denied:
        raise rest_denial(denied) from None
    return principal


@require_GET
def speakers(request: HttpRequest) -> JsonResponse:
    """``GET /v1/tts/speakers``: the engine's voices and aliases, even with no worker up."""
    request_id = request_id_of(request)
    try:
        authenticate(request)
    except RestError as error:
        return error_response(error, request_id)
    return JsonResponse(voices_listing())


def rest_denial(denied: AdmissionDenied) -> RestError:
    """An accounts denial or stop as its §6 status: 401/403/429/402/503 (H1, H4)."""
    forbidden = denied.reason in ("origin_not_allowed", "endpoint_not_allowed")
    return RestError(*denial_error(denied), status=403 if forbidden else None)


@csrf_exempt
@require_POST
async def synthesize(request: HttpRequest) -> HttpResponseBase:
    """``POST /v1/tts``: the whole audio of one request as one response (H1–H5).

    The admission's lease is held until the response ends: for a streamed (spooled) body,
    until its last chunk is sent.
    """
    request_id = request_id_of(request)
    usage = TtsUsage(route=Route.TTS_REST)  # auth off too (an admission would tell)
    try:
        response = await metered_synthesis(request, request_id, usage)
    except asyncio.CancelledError:  # H5: the client went away; the job was withdrawn
        await usage.end(status="cancelled", request_id=request_id)
        raise
    except Exception as exc:  # boundary: one request (issue 9); the job was withdrawn
        log_failure(logger, "tts rest request %s failed", request_id)
        failure: Failure = "service_unavailable" if is_outage(exc) else "internal_error"
        event = failure_error(failure, request_id)
        error = RestError(event.code, event.message, event.retry_after_ms)
        await usage.end(
            status="failed",
            request_id=request_id,
            error_code=failure,
            close_code=error.status,
        )
        return error_response(error, request_id)
    if not isinstance(response, StreamingHttpResponse):  # else read_chunks releases
        await usage.release()
    return response


async def metered_synthesis(
    request: HttpRequest, request_id: str, usage: TtsUsage
) -> HttpResponseBase:
    """H1: admit, parse, start (``tts.requests``), run the job, finish the record."""
    t0 = time.monotonic()
    try:
        await admit_rest(request, usage)
        req = parse_body(request)
        plan = await start_request(req, usage, request_id)
        await usage.ready()  # accounts U2: committed before any audio exists
        audio = await while_ticking(usage, run_job(plan))
    except (
        TtsProtocolError
    ) as exc:  # a refusal's record (issue 30), no usage record (U3)
        return await rest_failure(usage, RestError(exc.code, exc.message), request_id)
    except RestError as error:
        return await rest_failure(usage, error, request_id)
    except AdmissionDenied as denied:
        usage.known_key = denied.key
        refused = rest_denial(denied)
        return await rest_failure(usage, refused, request_id, denied.reason)
    # The whole body goes out in this response (docs/accounting.md: completed).
    usage.frame_sent(audio.data_bytes, audio.samples)
    seconds = audio.samples / req.sample_rate
    rtf = round((time.monotonic() - t0) / seconds, 3) if seconds else None
    await usage.finish(status="completed", rtf=rtf, close_code=200)  # no ttfb_ms
    if req.word_timestamps:
        return timed_response(req, plan.voice, audio, request_id)
    return audio_response(req, plan.voice, audio, request_id, usage)


async def rest_failure(
    usage: TtsUsage, error: RestError, request_id: str, code: str | None = None
) -> JsonResponse:
    """Fail the request's record (or record its refusal) with the status sent."""
    error_code = code or error.code.lower()
    await usage.fail(
        request_id=request_id, error_code=error_code, close_code=error.status
    )
    return error_response(error, request_id)


def parse_body(request: HttpRequest) -> TtsRequest:
    """W11/H4: the size cap (413), then the JSON body (400)."""
    too_large = RestError("VALIDATION_ERROR", "Message too large", status=413)
    try:
        body = request.body
    except RequestDataTooBig:
        raise too_large from None
    if len(body) > settings.TTS_MAX_MESSAGE_BYTES:
        raise too_large
    return parse_rest_body(body)


async def run_job(plan: RequestPlan) -> JobAudio:
    """Run the worker job to its end (Q2–Q4); H4's timeout is 504."""
    room = WAV_HEADER_BYTES if plan.req.format == "wav" else 0
    job = ChannelJob(get_channel_layer(), header_room=room)
    try:
        return await job.run(
            plan.first,
            timeout_s=settings.TTS_REST_TIMEOUT_S,
            rate=plan.req.sample_rate,
        )
    except JobError as error:
        retry = settings.TTS_OVERLOAD_RETRY_MS
        raise RestError(
            error.code,
            error.message,
            retry if error.code == "STREAMING_OVERLOADED" else None,
        ) from None
    except TimeoutError:
        raise RestError("TIMEOUT", "Synthesis timed out") from None


def finished_body(req: TtsRequest, audio: JobAudio) -> int:
    """The body's size, its WAV header (for ``wav``) written with the true sizes (H2)."""
    if req.format == "wav":
        audio.body.seek(0)
        audio.body.write(wav_file_header(req.sample_rate, audio.data_bytes))
    return audio.body.seek(0, 2)


def audio_response(
    req: TtsRequest, voice: str, audio: JobAudio, request_id: str, usage: TtsUsage
) -> HttpResponseBase:
    """H2: the complete body with its sizes and metadata headers."""
    body = audio.body
    size = finished_body(req, audio)
    body.seek(0)
    response: HttpResponseBase
    if size <= READ_BYTES * 32:
        response = HttpResponse(body.read())
        body.close()
    else:
        response = StreamingHttpResponse(read_chunks(body, usage))
    response["Content-Type"] = CONTENT_TYPES[req.format].format(rate=req.sample_rate)
    response["Content-Length"] = str(size)
    response["X-Request-Id"] = request_id
    response["X-Audio-Duration-Seconds"] = f"{audio.samples / req.sample_rate:.2f}"
    response["X-Sample-Rate"] = str(req.sample_rate)
    response["X-Speaker"] = voice
    return response


def timed_response(
    req: TtsRequest, voice: str, audio: JobAudio, request_id: str
) -> JsonResponse:
    """Issue 35: ``word_timestamps`` turns H2's body into JSON: the same bytes in
    ``audio_base64``, H2's metadata, and the words."""
    size = finished_body(req, audio)
    audio.body.seek(0)
    data = audio.body.read(size)
    audio.body.close()
    response = JsonResponse(
        {
            "request_id": request_id,
            "content_type": CONTENT_TYPES[req.format].format(rate=req.sample_rate),
            "sample_rate": req.sample_rate,
            "speaker": voice,
            "audio_duration_seconds": round(audio.samples / req.sample_rate, 2),
            "audio_base64": base64.b64encode(data).decode("ascii"),
            "words": audio.words,
        }
    )
    response["X-Request-Id"] = request_id
    return response


async def read_chunks(body: IO[bytes], usage: TtsUsage) -> AsyncIterator[bytes]:
    """Stream a spooled body; at its end (or when abandoned) close it and give the
    lease back (H1)."""
    try:
        while chunk := body.read(READ_BYTES):
            yield chunk
    finally:
        body.close()
        await asyncio.shield(usage.release())
