"""Client frames applied to one realtime session, per dialect (§4–§6, §8.2, §9).

``ClientSteps.message`` parses a frame once into a typed event (``asr.protocol``), applies
the control budget and the dialect the event selects (DI-2), and applies the event to the
session: each handler validates first and changes state after (STYLE 18) and runs the
CPU-heavy audio steps of the front end (``asr.front_end``) off the loop (AR-2). It holds no
consumer: it returns the frame's outputs in order (session outputs, echoes and the error
records of ``asr.errors``), and the consumer performs them, stopping at the first that ends
the session. An append's audio is metered as the quota accepts it (MT-2, MT-3).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from functools import partial

from django.conf import settings

from accounts.exceptions import AdmissionDenied
from asr import errors
from asr.config import VLLM_RATE, ConfigError, Models, SessionConfig
from asr.connection import served_models
from asr.errors import RealtimeFail, Reject
from asr.events import BufferCleared, ClientOut, ModelValidated, SessionUpdated
from asr.front_end import FrontEnd
from asr.outputs import Out, Overflow
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
from asr.vllm_update import validate_vllm_update
from gateway import jsontext
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


Action = Out | ClientOut | RealtimeFail | Reject


class ClientSteps:
    """The client event steps of one session, over its front end and usage."""

    def __init__(self, session: RealtimeSession, usage: RealtimeUsage) -> None:
        self.session = session
        self.usage = usage
        self.control = ControlBudget.from_settings()  # this connection's control events
        self.front = FrontEnd(
            session.config, session.dialect, trim=settings.ASR_TRIM_NONSPEECH
        )

    async def message(
        self, text: str | None, data: bytes | None, *, version: str
    ) -> list[Action]:
        """The outputs of one frame; a refused event's are those before its ``Reject``; a
        frame over ``ASR_MAX_MESSAGE_BYTES`` ends the session (LM-1).

        ``version`` is the pinned worker's model version (SE-15).
        """
        try:
            event = await self.parse(text, data)
        except jsontext.TooLarge:
            return [RealtimeFail("message_too_large")]
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

    async def parse(self, text: str | None, data: bytes | None) -> ClientEvent:
        """The frame, measured and parsed in one call, as an event of the session's
        dialect; one over ``PARSE_INLINE`` characters (or bytes) off the loop (AR-2)."""
        parse = partial(
            parse_client_event,
            text,
            data,
            dialect=self.session.dialect,
            pcm16=self.session.config.format == "audio/pcm",
            limit=settings.ASR_MAX_MESSAGE_BYTES,
        )
        frame = data if data is not None else text or ""
        if len(frame) > PARSE_INLINE:
            return await asyncio.to_thread(parse)
        return parse()

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
        tail = await asyncio.to_thread(self.front.configure, new, self.session.dialect)
        outs = self.session.ingest(tail) if tail is not None else []
        return [*outs, *self.session.configure(new)]

    async def append(self, event: AudioAppend) -> list[Action]:
        """AI-1: take quota (MT-3) and meter, hear off the loop, ingest and forward; an
        append that overflows is not metered (AI-1 step 6)."""
        payload, rate = event.audio, self.front.rate
        if not payload:
            return []
        samples = len(payload) // self.front.width
        try:
            accepted = await self.usage.take(samples, rate)
        except AdmissionDenied as denied:  # limits_unavailable
            return [errors.stop(denied.reason)]
        outs: list[Action] = []
        if accepted:
            heard = await asyncio.to_thread(self.front.append, payload, accepted)
            outs += self.session.ingest(heard)
            if any(isinstance(out, Overflow) for out in outs):
                self.usage.give_back(accepted, rate)
        if accepted < samples:  # the rest is dropped, unmetered (MT-3, accounts Q8)
            outs.append(errors.stop("quota_exceeded"))
        return outs

    async def commit(self, event: AudioCommit) -> list[Action]:
        """IT-2 to IT-4: flush, check the minimum, commit."""
        outs = await self.flush_resampler()
        short = self.session.commit_ready(settings.ASR_MIN_COMMIT_MS)
        if short is None:
            self.front.commit()
            return [*outs, *self.session.commit(self.front.clock)]
        text = errors.message("commit_empty", min=settings.ASR_MIN_COMMIT_MS, ms=short)
        code = "input_audio_buffer_commit_empty"
        return [*outs, Reject(code, text, None, event.event_id)]

    async def flush_resampler(self) -> list[Action]:
        """The resampler's pending output belongs to the item being committed (AI-4)."""
        tail = await asyncio.to_thread(self.front.flush)
        return list(self.session.ingest(tail)) if tail.pcm else []

    async def clear(self) -> list[Action]:
        """IT-14: drop the item, reset the resampler and the VAD, then cleared."""
        clock = await asyncio.to_thread(self.front.clear)
        return [*self.session.clear(clock), BufferCleared()]

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
        outs = await self.flush_resampler()
        self.front.commit()
        return [*outs, *self.session.commit(self.front.clock)]
