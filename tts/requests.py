"""The start of every TTS request: ``/v1/tts/ws``, ``POST /v1/tts`` and ``POST /v1/audio/speech``
(docs/specs/tts-ws.md L1 steps 4–7, H1).

``start_request`` is the one function that starts a validated request, whatever its transport:
a client secret's pins, K4's token (a stream's requests after its first), the voice and the
worker segments with the speakable-text check (R5, §7, R7: ``tts.prepare``), K2–K3 on a stream
(the request becomes its active one before it is metered), then the characters reserved and the
usage record opened (accounts Q7, U3). Its ``RequestPlan.submit`` is the job's first message
(Q6), which the transport places: a stream on its consumer's ``WorkerLink``, a REST view with
``tts.client.ChannelJob``. ``start_on_stream`` is a stream's call: its request id (X1, K3) and
its refusals as ``Fail`` records.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from accounts.exceptions import AdmissionDenied
from gateway import metrics
from gateway.logs import request_id_var
from tts.engine_info import EngineInfo
from tts.errors import denial_fail
from tts.messages import TtsSubmit, sampling_of
from tts.outputs import TtsFail, refusal
from tts.pins import pinned
from tts.prepare import prepare
from tts.protocol import TtsProtocolError, TtsRequest
from tts.session import ActiveRequest, TtsSession
from tts.speakers import configured_engine
from tts.usage import TtsUsage

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RequestPlan:
    """A validated request, resolved and segmented: ready to meter and submit."""

    req: TtsRequest
    request_id: str
    voice: str
    info: EngineInfo  # the engine as configured when the request started
    segments: list[dict[str, Any]] = field(repr=False)

    @property
    def spans(self) -> list[tuple[int, int, int]]:
        """``(seq, char_start, char_end)`` of the segments (T7)."""
        return [(s["seq"], s["char_start"], s["char_end"]) for s in self.segments]

    def submit(self, job_id: str, reply_channel: str, deadline: float) -> TtsSubmit:
        """The job's first message (Q6)."""
        req = self.req
        return TtsSubmit(
            job_id=job_id,
            reply_channel=reply_channel,
            deadline=deadline,
            voice=self.voice,
            segments=self.segments,
            format=req.format,
            sample_rate=req.sample_rate,
            request_id=self.request_id,
            incremental=req.incremental,
            word_timestamps=req.word_timestamps,
            **sampling_of(req),
        )


async def start_request(
    req: TtsRequest,
    usage: TtsUsage,
    request_id: str,
    *,
    stream: TtsSession | None = None,
) -> RequestPlan:
    """Start ``req`` (L1 steps 4–7): ready to submit, active on ``stream`` when given, and
    metered; raise ``TtsProtocolError`` or ``AdmissionDenied`` when it cannot run."""
    admission = usage.admission
    pins = admission.principal.secret_session if admission is not None else None
    if pins:  # what the stream's client secret pins (issue 35)
        req = pinned(req, pins)
    if stream is not None and stream.requests_started:
        await usage.take_request_token()  # K4
    info = configured_engine()
    voice, segments = await prepare(req, info)
    plan = RequestPlan(req, request_id, voice, info, segments)
    if stream is not None:  # K2–K3, before it is metered
        active = stream.begin(
            req,
            request_id=request_id,
            voice=voice,
            engine=info.wire_name,
            segment_chars=(
                settings.TTS_SEGMENT_MIN_CHARS,
                settings.TTS_SEGMENT_MAX_CHARS,
            ),
            chunk_window=settings.TTS_CHUNK_WINDOW,
        )
        active.text_chars = len(req.text)
        active.add_segments(plan.spans)
    logger.info("tts request %s: %d chars", request_id, len(req.text))
    metrics.REQUESTS.labels("tts").inc()
    await usage.open_request(  # accounts Q7: may refuse it before any audio
        request_id=request_id,
        model=info.model_version,
        text_chars=len(req.text),
        sample_rate=req.sample_rate,
    )
    return plan


@dataclass(frozen=True)
class Started:
    """A stream's request that is active and metered, ready to submit."""

    plan: RequestPlan
    active: ActiveRequest


async def start_on_stream(
    session: TtsSession, usage: TtsUsage, req: TtsRequest
) -> Started | TtsFail:
    """A stream's request: its id (X1, K3), then ``start_request``; or the error that
    refused it (a per-request RPM denial is not fatal, K4)."""
    request_id = session.request_id_for(req.request_id)
    request_id_var.set(request_id)
    try:
        plan = await start_request(req, usage, request_id, stream=session)
    except TtsProtocolError as exc:
        return refusal(exc, request_id=request_id, keep_alive=req.keep_alive)
    except AdmissionDenied as denied:
        fatal = False if denied.reason == "rate_limited" else None
        return denial_fail(denied, request_id=request_id, fatal=fatal)
    assert session.active is not None
    return Started(plan, session.active)
