"""The start of every TTS request: ``/v1/tts/ws``, ``POST /v1/tts`` and ``POST /v1/audio/speech``
(docs/specs/tts-ws.md L1 steps 4–7, H1).

``start_request`` is the one function that starts a validated request, whatever its transport:
a client secret's pins (``tts.pins`` validates them when the secret is minted), K4's token (a
stream's requests after its first), the voice (R5, §8) and the worker segments (§7, ``tts.text``,
off the event loop for long texts, T1) with the one speakable-text check (R7: a text none of
whose segments has a letter or digit is refused), K2–K3 on a stream (the request becomes its
active one before it is metered), then the characters reserved and the usage record opened
(accounts Q7, U3). Its plan carries the job's first message (Q6, ``RequestPlan.first``), which
the transport's ``WorkerLink`` sends, naming each attempt: a stream's consumer's link, or a
REST view's ``tts.client.ChannelJob``. ``start_on_stream`` is a stream's call: its request id
(X1, K3) and its refusals as ``Fail`` records.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from accounts.admission import admit_request
from accounts.exceptions import AdmissionDenied
from gateway import metrics
from gateway.logs import request_id_var
from tts.engine_info import EngineInfo
from tts.errors import denial_fail
from tts.messages import TtsSubmit, sampling_of
from tts.outputs import TtsFail, refusal
from tts.protocol import TtsProtocolError, TtsRequest
from tts.session import ActiveRequest, TtsSession
from tts.speakers import UnknownSpeaker, configured_engine, resolve_speaker
from tts.text import OFF_LOOP_CHARS, text_payload
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
    # The job's first message (Q6), built with the plan; its ``WorkerLink`` names each
    # attempt's job, its reply channel and its deadline.
    first: TtsSubmit = field(init=False, repr=False)

    @property
    def spans(self) -> list[tuple[int, int, int]]:
        """``(seq, char_start, char_end)`` of the segments (T7)."""
        return [(s["seq"], s["char_start"], s["char_end"]) for s in self.segments]

    def __post_init__(self) -> None:
        req = self.req
        first = TtsSubmit(
            job_id="",
            reply_channel="",
            deadline=0.0,
            voice=self.voice,
            segments=self.segments,
            format=req.format,
            sample_rate=req.sample_rate,
            request_id=self.request_id,
            incremental=req.incremental,
            normalize=req.normalize,
            word_timestamps=req.word_timestamps,
            **sampling_of(req),
        )
        object.__setattr__(self, "first", first)


def pinned(req: TtsRequest, pins: Mapping[str, Any] | None) -> TtsRequest:
    """``req`` with a client secret's pins in place of its own values (issue 35)."""
    if not pins:
        return req
    changes = {k: v for k, v in pins.items() if k in ("format", "sample_rate")}
    if "voice" in pins:
        changes["speaker"] = pins["voice"]
    return dataclasses.replace(req, **changes)


def resolve_voice(req: TtsRequest, info: EngineInfo) -> str:
    """R5 and §8: check engine support, then resolve the speaker (last, as in R1)."""
    if req.speed != 1.0 and not info.supports_speed:
        raise TtsProtocolError(
            "VALIDATION_ERROR", f"speed is not supported by engine {info.wire_name}"
        )
    try:
        return resolve_speaker(req.speaker, info, settings.TTS_SPEAKER_ALIASES)
    except UnknownSpeaker as unknown:
        error = TtsProtocolError("VALIDATION_ERROR", unknown.message[:500])
        error.extra = {"valid_speakers": unknown.valid}
        raise error from None


async def prepare(
    req: TtsRequest, info: EngineInfo
) -> tuple[str, list[dict[str, Any]]]:
    """The request's voice and worker segments (none yet for an incremental request, whose
    text comes later), cut off the event loop for long texts (T1); raise
    ``TtsProtocolError`` when it cannot run (R5, R7)."""
    voice = resolve_voice(req, info)
    if req.incremental:
        return voice, []
    payload = partial(
        text_payload,
        req.text,
        chunking=req.chunking,
        min_chars=settings.TTS_SEGMENT_MIN_CHARS,
        max_chars=settings.TTS_SEGMENT_MAX_CHARS,
    )
    long = len(req.text) > OFF_LOOP_CHARS
    segments = await asyncio.to_thread(payload) if long else payload()
    if not segments:
        raise TtsProtocolError("VALIDATION_ERROR", "Text has no speakable content")
    return voice, segments


async def admit_rest(request: HttpRequest, usage: TtsUsage) -> None:
    """H1: a REST request's admission, held by ``usage``; none with TTS auth off (W7).
    Raises ``AdmissionDenied``."""
    if settings.TTS_AUTH_REQUIRED:
        usage.admission = await admit_request(request, endpoint="tts")


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
