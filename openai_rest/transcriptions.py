"""``POST /v1/audio/transcriptions``: OpenAI's file transcription on the realtime ASR
admission, metering and worker jobs.

Admit on ``asr`` (the key's limits, lease and quota), parse the form, decode the file with
PyAV (capped by ``OPENAI_TRANSCRIBE_MAX_BYTES`` and ``OPENAI_TRANSCRIBE_MAX_SECONDS``), reserve
its seconds, cut it into pieces of at most 28 s (``openai_rest.split``) and transcribe them as
the items of one worker job (``asr.client``); a file of any length is transcribed completely.
One usage record per call (its audio seconds). ``stream=true`` answers with SSE
``transcript.text.delta`` (one a word, each piece's words as soon as its decode is done) and
``transcript.text.done`` (the deltas joined).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator

import numpy as np
import numpy.typing as npt
from channels.layers import get_channel_layer
from django.conf import settings
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    JsonResponse,
    StreamingHttpResponse,
)
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from accounts.admission import admit_request
from accounts.exceptions import AdmissionDenied
from accounts.metering import Route, refuse
from asr.client import AsrJobError, FileJob, PieceText
from asr.usage import RealtimeUsage, UsageStatus
from asr.whisper import MODEL_RATE
from gateway import metrics
from gateway.logs import request_id_of
from gateway.outages import is_outage, log_failure
from gateway.wording import count
from openai_rest.decode import (
    AudioTooLong,
    TruncatedAudio,
    UnreadableAudio,
    decode_upload,
)
from openai_rest.errors import (
    OpenAiError,
    boundary_error,
    denial_error,
    error_response,
    invalid,
    outcome_error,
    server_error,
    timeout_error,
)
from openai_rest.speech import sse
from openai_rest.split import Piece, split_pieces
from openai_rest.ticking import ticked
from openai_rest.transcription_request import (
    TranscriptionRequest,
    check_length,
    parse_transcription,
)
from openai_rest.transcripts import (
    PieceTranscript,
    full_text,
    piece_transcript,
    render,
    word_deltas,
)
from openai_rest.transcripts import usage as usage_of

logger = logging.getLogger(__name__)


def job_error(error: AsrJobError) -> OpenAiError:
    """A worker outcome, or a failed decode, as OpenAI's server error."""
    if error.outcome is not None:
        return outcome_error(error.outcome)
    return server_error("Transcription failed.")


@csrf_exempt
@require_POST
async def transcriptions(request: HttpRequest) -> HttpResponseBase:
    """``POST /v1/audio/transcriptions``: the file's transcript, or its SSE stream."""
    request_id = request_id_of(request)
    try:
        check_length(request)
        admission = await admit_request(request, endpoint="asr")
    except OpenAiError as error:
        return error_response(error, request_id)
    except AdmissionDenied as denied:
        refused = denial_error(denied)
        await refuse(
            denied.key,
            endpoint="asr",
            route=Route.ASR_REST,
            request_id=request_id,
            error_code=denied.reason,
            close_code=refused.status,
        )
        return error_response(refused, request_id)
    usage = RealtimeUsage(
        admission,
        stream_id=admission.stream_id,
        started_at=timezone.now(),
        request_id=request_id,
    )
    call = Transcription(request_id, usage)
    try:
        return await call.run(request)
    except asyncio.CancelledError:  # the client went away
        await call.end("cancelled")
        raise
    except Exception as exc:  # boundary: one request
        log_failure(logger, "transcription %s failed", request_id)
        answer, failure = boundary_error(exc)
        await call.end("failed", failure, answer.status)
        return error_response(answer, request_id)


class Transcription:
    """One call: its usage, and (for a stream) the body that ends it."""

    def __init__(self, request_id: str, usage: RealtimeUsage) -> None:
        self.request_id, self.usage = request_id, usage
        self.ended = False
        self.started = time.monotonic()

    async def end(
        self, status: UsageStatus, code: str = "", http_status: int | None = None
    ) -> None:
        """Finish the record (a refusal's, if none was opened) and give the lease back,
        once; the record keeps the HTTP status sent."""
        if self.ended:
            return
        self.ended = True
        try:
            await self.usage.finish(
                status=status, error_code=code, close_code=http_status
            )
        except Exception:  # boundary: the record (the reaper finalizes it later)
            logger.exception("transcription: usage record not finalized")
        await asyncio.shield(self.usage.release())

    async def run(self, request: HttpRequest) -> HttpResponseBase:
        """Validate, decode, reserve, transcribe; every refusal in OpenAI's shape."""
        try:
            req = await asyncio.to_thread(parse_transcription, request)
            pcm = await asyncio.to_thread(_decode, req)
            pieces = split_pieces(pcm)
            metrics.REQUESTS.labels("asr").inc()
            await self.usage.open(model=req.model)
            if await self.usage.accept(len(pcm), MODEL_RATE) < len(pcm):
                raise AdmissionDenied("quota_exceeded")
            texts = ticked(self.usage, self._texts(req, pcm, pieces))
            if req.stream:
                first = await anext(texts, None)
                stream = self.stream_body(texts, first, pieces, len(pcm))
                response = StreamingHttpResponse(
                    stream, content_type="text/event-stream"
                )
                response["Cache-Control"] = "no-cache"
                response["x-request-id"] = self.request_id
                return response
            transcripts = [_transcript(pieces, t) async for t in texts]
        except OpenAiError as error:
            return await self.refused(error, error.code or "invalid_request")
        except AdmissionDenied as denied:
            return await self.refused(denial_error(denied), denied.reason)
        except AsrJobError as error:
            return await self.refused(job_error(error), "engine_error")
        except TimeoutError:
            return await self.refused(timeout_error(), "timeout")
        self._count(transcripts, len(pcm))
        await self.end("completed", http_status=200)
        return self.response(req, transcripts, len(pcm) / MODEL_RATE)

    async def refused(self, error: OpenAiError, code: str) -> HttpResponseBase:
        """End the call as failed with ``code``, and answer ``error``."""
        await self.end("failed", code, error.status)
        return error_response(error, self.request_id)

    async def _texts(
        self, req: TranscriptionRequest, pcm: npt.NDArray[np.int16], pieces: list[Piece]
    ) -> AsyncGenerator[PieceText, None]:
        if not pieces:
            return
        job = FileJob(
            get_channel_layer(),
            job_id=str(self.usage.stream_id),
            language=req.language,
            prompt=req.prompt,
            words=req.words,
        )
        source = job.transcribe(
            pcm,
            [(p.start, p.end) for p in pieces],
            timeout_s=settings.OPENAI_TRANSCRIBE_TIMEOUT_S,
        )
        try:
            async for text in source:
                yield text
        finally:
            await source.aclose()

    def _count(self, transcripts: list[PieceTranscript], samples: int) -> None:
        """Meter the call's delivered work: ``samples`` of its audio, and the transcripts
        as one item."""
        self.usage.audio(samples, MODEL_RATE)
        chars = len(full_text(transcripts))
        self.usage.item(chars, time.monotonic() - self.started)

    def response(
        self,
        req: TranscriptionRequest,
        transcripts: list[PieceTranscript],
        duration_s: float,
    ) -> HttpResponse:
        """The transcript in ``response_format``."""
        body, content_type = render(
            req.response_format,
            transcripts,
            duration_s=duration_s,
            language=req.language,
            words=req.words,
        )
        response: HttpResponse
        if isinstance(body, dict):
            response = JsonResponse(body)
        else:
            response = HttpResponse(body, content_type=content_type)
        response["x-request-id"] = self.request_id
        return response

    async def stream_body(
        self,
        texts: AsyncGenerator[PieceText, None],
        first: PieceText | None,
        pieces: list[Piece],
        samples: int,
    ) -> AsyncIterator[bytes]:
        """SSE: a delta a word, then done with the whole text and usage.

        A stream that ends before ``done`` bills what was delivered: the audio up to the
        end of the last piece whose deltas were all sent, and their transcript."""
        transcripts: list[PieceTranscript] = []  # the pieces whose deltas were all sent
        sent_samples = 0  # the file up to the end of the last of them
        status: UsageStatus = "failed"
        code = "internal_error"
        try:
            try:
                text = first
                while text is not None:
                    shown = bool(full_text(transcripts))
                    for delta in word_deltas(int(shown), text.text):
                        yield sse({"type": "transcript.text.delta", "delta": delta})
                    transcripts.append(_transcript(pieces, text))
                    sent_samples = pieces[text.seq].end
                    text = await anext(texts, None)
            except Exception as exc:  # boundary: the SSE body, once its 200 is out
                if not isinstance(exc, ENDINGS) and not is_outage(exc):
                    raise
                error = _stream_error(exc)
                code = error.code or "internal_error"
                yield sse({"type": "error", "error": error.body()["error"]})
                return
            self._count(transcripts, samples)
            done = {
                "type": "transcript.text.done",
                "text": full_text(transcripts),
                "usage": usage_of(samples / MODEL_RATE),
            }
            yield sse(done)
            status, code = "completed", ""
        except (asyncio.CancelledError, GeneratorExit):
            status, code = "cancelled", ""
            raise
        finally:
            try:
                await texts.aclose()
            except Exception:  # boundary: the job's iterator; its job is withdrawn
                logger.exception("transcription stream: job not closed cleanly")
            if status != "completed" and transcripts:
                self._count(transcripts, sent_samples)
            await asyncio.shield(self.end(status, code, 200))  # the body had begun


def _transcript(pieces: list[Piece], text: PieceText) -> PieceTranscript:
    """A piece's transcript in file seconds."""
    return piece_transcript(
        pieces[text.seq], text.text, text.segments, text.words, text.language
    )


def _decode(req: TranscriptionRequest) -> npt.NDArray[np.int16]:
    """Decode the upload, mapping failures to OpenAI's 400s."""
    cap = settings.OPENAI_TRANSCRIBE_MAX_SECONDS
    try:
        return decode_upload(req.file, max_seconds=cap)
    except TruncatedAudio:
        raise invalid(
            "The audio file is truncated: it ends before the length it declares.",
            param="file",
            code="invalid_audio_format",
        ) from None
    except UnreadableAudio:
        raise invalid(
            "The audio file could not be decoded or its format is not supported.",
            param="file",
            code="invalid_audio_format",
        ) from None
    except AudioTooLong:
        raise invalid(
            f"Audio file is too long: the maximum is {count(cap, 'second')}.",
            param="file",
            code="audio_too_long",
        ) from None


ENDINGS = (AsrJobError, TimeoutError, AdmissionDenied)  # how a job's stream ends early


def _stream_error(exc: BaseException) -> OpenAiError:
    if isinstance(exc, AdmissionDenied):
        return denial_error(exc)
    if isinstance(exc, AsrJobError):
        return job_error(exc)
    if is_outage(exc):
        return boundary_error(exc)[0]
    return timeout_error()
