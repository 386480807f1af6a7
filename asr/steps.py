"""Client frames applied to one realtime session, per dialect (§4–§6, §8.2, §9).

``ClientSteps.message`` parses a frame once into a typed event (``asr.protocol``), applies
the control budget and the dialect the event selects (DI-2), and applies the event to the
session: each handler validates first and changes state after (STYLE 18) and runs the
CPU-heavy audio steps off the loop (AR-2). It holds no consumer: it returns the frame's
outputs in order (session outputs, echoes, ``Meter``, and the error records of
``asr.errors``), and the consumer performs them, stopping at the first that ends the session.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from django.conf import settings

from accounts.exceptions import AdmissionDenied
from asr import errors
from asr.config import VLLM_RATE, ConfigError, Models, SessionConfig
from asr.connection import served_models
from asr.errors import RealtimeFail, Reject
from asr.events import BufferCleared, ClientOut, ModelValidated, SessionUpdated
from asr.outputs import Meter, Out
from asr.protocol import (
    AudioAppend,
    AudioClear,
    AudioCommit,
    ClientEvent,
    Dialect,
    RealtimeProtocolError,
    SessionUpdate,
    TranscriptionSessionUpdate,
    VllmCommit,
    VllmSessionUpdate,
    parse_client_event,
)
from asr.session import RealtimeSession
from asr.updates import validate_update
from asr.usage import RealtimeUsage
from asr.vad import AudioFrontEnd
from asr.vllm_update import validate_vllm_update
from gateway.link.budget import ControlBudget
from gateway.link.states import Transitions

PARSE_INLINE = 64 * 1024  # AR-2: larger frames are parsed (JSON, base64) off the loop
# DI-3: the dialect is fixed once; only an undetermined session's first event selects one.
DIALECTS = Transitions(
    {
        Dialect.UNDETERMINED: {Dialect.OPENAI, Dialect.VLLM},
        Dialect.OPENAI: (),
        Dialect.VLLM: (),
    }
)


Action = Out | ClientOut | Meter | RealtimeFail | Reject


class ClientSteps:
    """The client event steps of one session, over its front end and usage."""

    def __init__(self, session: RealtimeSession, usage: RealtimeUsage) -> None:
        self.session = session
        self.usage = usage
        self.control = ControlBudget.from_settings()  # this connection's control events
        self.front = AudioFrontEnd(session.config.format, session.config.rate)

    async def message(
        self, text: str | None, data: bytes | None, *, large: bool, version: str
    ) -> list[Action]:
        """The outputs of one frame; a refused event's are those before its ``Reject``.

        ``large`` frames are parsed off the loop (AR-2); ``version`` is the pinned worker's
        model version (SE-15).
        """
        try:
            event = await self.parse(text, data, large=large)
        except (
            RealtimeProtocolError
        ) as exc:  # a frame may select the dialect and still fail
            first = await self.set_dialect(exc.selects) if exc.selects else []
            return [*first, Reject(exc.code, exc.message, exc.param, exc.event_id)]
        if event.control and not self.control.take():
            return [errors.rate_limited(self.control.retry_after_ms())]
        outs: list[Action] = []
        try:
            if event.selects is not None:
                outs += await self.set_dialect(event.selects)
            outs += await self.apply(event, served_models(version))
        except (RealtimeProtocolError, ConfigError) as exc:
            event_id = getattr(exc, "event_id", None) or event.event_id
            outs.append(Reject(exc.code, exc.message, exc.param, event_id))
        return outs

    async def parse(
        self, text: str | None, data: bytes | None, *, large: bool
    ) -> ClientEvent:
        """The frame as an event of the session's dialect; a ``large`` one off the loop."""
        dialect, pcm16 = self.session.dialect, self.session.config.format == "audio/pcm"
        if large:
            return await asyncio.to_thread(
                parse_client_event, text, data, dialect=dialect, pcm16=pcm16
            )
        return parse_client_event(text, data, dialect=dialect, pcm16=pcm16)

    async def apply(self, event: ClientEvent, models: Models) -> list[Action]:
        """Run the handler of ``event`` (the parse table decides which types exist)."""
        if isinstance(event, AudioAppend):
            return await self.append(event)
        if isinstance(event, SessionUpdate | TranscriptionSessionUpdate):
            return await self.session_update(event, models)
        if isinstance(event, VllmSessionUpdate):
            return await self.vllm_update(event, models)
        if isinstance(event, AudioCommit):
            return await self.commit(event)
        if isinstance(event, VllmCommit):
            return await self.vllm_commit(event)
        assert isinstance(event, AudioClear), event.type
        return await self.clear()

    async def set_dialect(self, dialect: Dialect) -> list[Action]:
        """Fix the dialect (DI-3); vLLM input is PCM16 at 16 kHz (AI-6)."""
        self.session.dialect = DIALECTS.move(self.session.dialect, dialect)
        if dialect is not Dialect.VLLM:
            return []
        self.session.beta = False
        config = self.session.config
        return await self.apply_config(
            replace(config, format="audio/pcm", rate=VLLM_RATE)
        )

    # OpenAI dialect.

    async def session_update(
        self, event: SessionUpdate | TranscriptionSessionUpdate, models: Models
    ) -> list[Action]:
        """SE-5 to SE-9 (GA) or SE-12 (beta): validate, change, then the echo."""
        beta = isinstance(event, TranscriptionSessionUpdate)
        new = validate_update(event.session, self.session.config, models, beta=beta)
        if beta:
            self.session.beta = True  # the beta update marks the client beta
        return [*await self.apply_config(new), SessionUpdated(beta=beta)]

    async def apply_config(self, new: SessionConfig) -> list[Action]:
        """Format changes flush the resampler into the current item (AI-4)."""
        session = self.session
        old, had_vad = session.config, session.needs_vad
        outs: list[Action] = []
        if (new.format, new.rate) != (old.format, old.rate):
            pcm, probs = await asyncio.to_thread(
                self.front.reformat, new.format, new.rate, vad=had_vad
            )
            outs += session.ingest(pcm, probs, 0.0)
        outs += session.configure(new)
        if session.needs_vad and not had_vad:
            self.front.vad.reset()
            session.detector.reset(session.clock)
        return outs

    async def append(self, event: AudioAppend) -> list[Action]:
        """AI-1: reserve quota (MT-3), decode off the loop, ingest, forward, meter."""
        payload = event.audio
        if not payload:
            return []
        rate = self.session.config.rate
        width = 2 if self.session.config.format == "audio/pcm" else 1
        samples = len(payload) // width
        try:
            accepted = await self.usage.accept(samples, rate)
        except AdmissionDenied as denied:  # limits_unavailable
            return [errors.stop(denied.reason)]
        outs: list[Action] = []
        if accepted:
            pcm, probs = await asyncio.to_thread(
                self.front.process,
                payload[: accepted * width],
                vad=self.session.needs_vad,
            )
            outs += self.session.ingest(pcm, probs, accepted * 1000 / rate)
            outs.append(Meter(accepted, rate))
        if accepted < samples:  # the rest is dropped, unmetered (MT-3, accounts Q8)
            outs.append(errors.stop("quota_exceeded"))
        return outs

    async def commit(self, event: AudioCommit) -> list[Action]:
        """IT-2 to IT-4: flush, check the minimum, commit."""
        outs = await self.flush_resampler()
        short = self.session.commit_ready(settings.ASR_MIN_COMMIT_MS)
        if short is None:
            return [*outs, *self.session.commit()]
        text = errors.message("commit_empty", min=settings.ASR_MIN_COMMIT_MS, ms=short)
        code = "input_audio_buffer_commit_empty"
        return [*outs, Reject(code, text, None, event.event_id)]

    async def flush_resampler(self) -> list[Action]:
        """The resampler's pending output belongs to the item being committed (AI-4)."""
        vad = self.session.needs_vad
        pcm, probs = await asyncio.to_thread(self.front.flush, vad=vad)
        return list(self.session.ingest(pcm, probs, 0.0)) if pcm else []

    async def clear(self) -> list[Action]:
        """IT-14: drop the item, reset the resampler and the VAD, then cleared."""
        pcm, _ = await asyncio.to_thread(self.front.flush, vad=False)
        self.session.clock += len(pcm) // 2
        self.front.reset()
        return [*self.session.clear(), BufferCleared()]

    # vLLM dialect.

    async def vllm_update(
        self, event: VllmSessionUpdate, models: Models
    ) -> list[Action]:
        """VL-2: validate the model, then session.updated{model}."""
        new = validate_vllm_update(event, self.session.config, models)
        self.session.model_validated = True
        return [*await self.apply_config(new), ModelValidated(new.model)]

    async def vllm_commit(self, event: VllmCommit) -> list[Action]:
        """VL-3 to VL-5: a non-final commit starts the item, a final one ends it."""
        if not self.session.model_validated:
            text = errors.message("model_not_validated")
            raise RealtimeProtocolError("model_not_validated", text)
        if not event.final:
            return list(self.session.start_generation())
        return [*await self.flush_resampler(), *self.session.commit()]
