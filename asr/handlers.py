"""Typed client events applied to one realtime session, per dialect (§4–§6, §8.2, §9).

``ClientHandlers`` owns the session's audio front end and applies each parsed event
(``asr.protocol``) to the session: it validates first and changes state after (STYLE 18), runs
the CPU-heavy audio steps off the loop (AR-2) and meters accepted audio (MT-2, MT-3). It holds
no consumer: each handler is an async generator of output batches (``Action`` lists) that the
consumer performs in order before the handler goes on (``Fail`` ends the session), and stops iterating once the session
has closed. ``ProtocolError`` and ``ConfigError`` raised here become one ``error`` event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from dataclasses import replace

from django.conf import settings

from accounts.exceptions import AdmissionDenied
from asr import errors
from asr.config import VLLM_RATE, Models, SessionConfig
from asr.errors import Fail
from asr.events import BufferCleared, ClientOut, ModelValidated, SessionUpdated
from asr.items import Out
from asr.protocol import (
    AudioAppend,
    AudioClear,
    AudioCommit,
    ClientEvent,
    Dialect,
    ProtocolError,
    SessionUpdate,
    TranscriptionSessionUpdate,
    VllmCommit,
    VllmSessionUpdate,
    parse_client_event,
)
from asr.session import RealtimeSession
from asr.updates import validate_update, validate_vllm_update
from asr.usage import RealtimeUsage
from asr.vad import AudioFrontEnd
from gateway.budget import ControlBudget

Action = Out | ClientOut | Fail
Steps = AsyncGenerator[Sequence[Action], None]


class ClientHandlers:
    """The client event handlers of one session, over its front end and usage."""

    def __init__(self, session: RealtimeSession, usage: RealtimeUsage) -> None:
        self.session = session
        self.usage = usage
        self.control = (
            ControlBudget.from_settings()
        )  # of this connection's control events
        self.front = AudioFrontEnd(session.config.format, session.config.rate)

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

    async def steps(self, event: ClientEvent, models: Models) -> Steps:
        """Control budget, then the DI-2 dialect the event selects, then its handler."""
        if event.control and not self.control.take():
            yield [errors.rate_limited(self.control.retry_after_ms())]
            return
        if event.selects is not None:
            async for actions in self.set_dialect(event.selects):
                yield actions
        async for actions in self.handler(event, models):
            yield actions

    def handler(self, event: ClientEvent, models: Models) -> Steps:
        """The handler of ``event`` (the parse table decides which types exist)."""
        if isinstance(event, AudioAppend):
            return self.append(event)
        if isinstance(event, SessionUpdate | TranscriptionSessionUpdate):
            return self.session_update(event, models)
        if isinstance(event, VllmSessionUpdate):
            return self.vllm_update(event, models)
        if isinstance(event, AudioCommit):
            return self.commit()
        if isinstance(event, VllmCommit):
            return self.vllm_commit(event)
        assert isinstance(event, AudioClear), event.type
        return self.clear()

    async def set_dialect(self, dialect: Dialect) -> Steps:
        """Fix the dialect (DI-3); vLLM input is PCM16 at 16 kHz (AI-6)."""
        self.session.dialect = dialect
        if dialect is Dialect.VLLM:
            self.session.beta = False
            config = self.session.config
            new = replace(config, format="audio/pcm", rate=VLLM_RATE)
            async for actions in self.apply_config(new):
                yield actions

    # OpenAI dialect.

    async def session_update(
        self, event: SessionUpdate | TranscriptionSessionUpdate, models: Models
    ) -> Steps:
        """SE-5 to SE-9 (GA) or SE-12 (beta): validate, change, then the echo."""
        beta = isinstance(event, TranscriptionSessionUpdate)
        new = validate_update(event.session, self.session.config, models, beta=beta)
        if beta:
            self.session.beta = True  # the beta update marks the client beta
        async for actions in self.apply_config(new):
            yield actions
        yield [SessionUpdated(beta=beta)]

    async def apply_config(self, new: SessionConfig) -> Steps:
        """Format changes flush the resampler into the current item (AI-4)."""
        session = self.session
        old, had_vad = session.config, session.needs_vad
        if (new.format, new.rate) != (old.format, old.rate):
            pcm, probs = await asyncio.to_thread(
                self.front.reformat, new.format, new.rate, vad=had_vad
            )
            yield session.ingest(pcm, probs, 0.0)
        yield session.configure(new)
        if session.needs_vad and not had_vad:
            self.front.vad.reset()
            session.detector.reset(session.clock)

    async def append(self, event: AudioAppend) -> Steps:
        """AI-1: reserve quota (MT-3), decode off the loop, ingest, forward, meter."""
        payload = event.audio
        if not payload:
            return
        rate = self.session.config.rate
        width = 2 if self.session.config.format == "audio/pcm" else 1
        samples = len(payload) // width
        try:
            accepted = await self.usage.accept(samples, rate)
        except AdmissionDenied as denied:  # limits_unavailable
            yield [errors.stop(denied.reason)]
            return
        if accepted:
            pcm, probs = await asyncio.to_thread(
                self.front.process,
                payload[: accepted * width],
                vad=self.session.needs_vad,
            )
            yield self.session.ingest(pcm, probs, accepted * 1000 / rate)
            # Reached only while open: an overflowing append is unmetered (AI-1.6).
            self.usage.audio(accepted, rate)
        if accepted < samples:  # the rest is dropped, unmetered (MT-3, accounts Q8)
            yield [errors.stop("quota_exceeded")]

    async def commit(self) -> Steps:
        """IT-2 to IT-4: flush, check the minimum, commit."""
        async for actions in self.flush_resampler():
            yield actions
        short = self.session.commit_ready(settings.ASR_MIN_COMMIT_MS)
        if short is not None:
            text = errors.message(
                "commit_empty", min=settings.ASR_MIN_COMMIT_MS, ms=short
            )
            raise ProtocolError("input_audio_buffer_commit_empty", text)
        yield self.session.commit()

    async def flush_resampler(self) -> Steps:
        """The resampler's pending output belongs to the item being committed (AI-4)."""
        vad = self.session.needs_vad
        pcm, probs = await asyncio.to_thread(self.front.flush, vad=vad)
        if pcm:
            yield self.session.ingest(pcm, probs, 0.0)

    async def clear(self) -> Steps:
        """IT-14: drop the item, reset the resampler and the VAD, then cleared."""
        pcm, _ = await asyncio.to_thread(self.front.flush, vad=False)
        self.session.clock += len(pcm) // 2
        self.front.reset()
        yield self.session.clear()
        yield [BufferCleared()]

    # vLLM dialect.

    async def vllm_update(self, event: VllmSessionUpdate, models: Models) -> Steps:
        """VL-2: validate the model, then session.updated{model}."""
        new = validate_vllm_update(event, self.session.config, models)
        self.session.model_validated = True
        async for actions in self.apply_config(new):
            yield actions
        yield [ModelValidated(new.model)]

    async def vllm_commit(self, event: VllmCommit) -> Steps:
        """VL-3 to VL-5: a non-final commit starts the item, a final one ends it."""
        if not self.session.model_validated:
            text = errors.message("model_not_validated")
            raise ProtocolError("model_not_validated", text)
        if event.final:
            async for actions in self.flush_resampler():
                yield actions
            yield self.session.commit()
        else:
            yield self.session.start_generation()
