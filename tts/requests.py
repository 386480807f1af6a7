"""The start of one TTS request, shared by ``/v1/tts/ws``, ``POST /v1/tts`` and
``POST /v1/audio/speech`` (docs/specs/tts-ws.md L1 steps 4–8, H1).

``plan_request`` does everything that may refuse a validated request before it is metered:
engine checks and the speaker (R5, §8), segmentation and normalisation (§7) and the
speakable-text check (R7). ``open_usage`` reserves its characters and opens the usage record
(accounts Q7, U3); ``RequestPlan.submit`` is the job's first message (Q6). A stream's request also
becomes its active one (K2–K3) before it is metered (``start_on_stream``).
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
from tts.prepare import engine_info, prepare_segments, resolve_voice
from tts.protocol import TtsProtocolError, TtsRequest
from tts.session import ActiveRequest, TtsSession
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


async def plan_request(req: TtsRequest, request_id: str) -> RequestPlan:
    """R5, §7, R7: resolve and segment ``req``; raise TtsProtocolError when it cannot run."""
    info = engine_info()
    voice = resolve_voice(req, info)
    segments = [] if req.incremental else await prepare_segments(req)
    if not req.incremental and not segments:
        raise TtsProtocolError("VALIDATION_ERROR", "Text has no speakable content")
    return RequestPlan(req, request_id, voice, info, segments)


@dataclass(frozen=True)
class Started:
    """A stream's request that is active and metered, ready to submit."""

    plan: RequestPlan
    active: ActiveRequest


async def start_on_stream(
    session: TtsSession, usage: TtsUsage, req: TtsRequest
) -> Started | TtsFail:
    """A stream's request: its id (X1, K3), K4's token for each after the first, the shared
    start, K2–K3 (it becomes the stream's active request), then its record (accounts Q7); or the
    error that refused it."""
    request_id = session.request_id_for(req)
    request_id_var.set(request_id)
    admission = usage.admission
    if admission is not None:  # what the stream's client secret pins (issue 35)
        req = pinned(req, admission.principal.secret_session)
    try:
        if session.requests_started:
            await usage.take_request_token()
        plan = await plan_request(req, request_id)
        active = session.begin(
            req,
            request_id=request_id,
            voice=plan.voice,
            engine=plan.info.wire_name,
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
        await open_usage(usage, plan)  # accounts Q7: may refuse it before any audio
    except TtsProtocolError as exc:
        return refusal(exc, request_id=request_id, keep_alive=req.keep_alive)
    except AdmissionDenied as denied:  # K4: a per-request RPM denial is not fatal
        fatal = False if denied.reason == "rate_limited" else None
        return denial_fail(denied, request_id=request_id, fatal=fatal)
    return Started(plan, active)


async def open_usage(usage: TtsUsage, plan: RequestPlan) -> None:
    """L1 step 7: reserve the text and open the record; raises ``AdmissionDenied`` (accounts Q7)."""
    await usage.open_request(
        request_id=plan.request_id,
        model=plan.info.model_version,
        text_chars=len(plan.req.text),
        sample_rate=plan.req.sample_rate,
    )
