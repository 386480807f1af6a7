"""Client event handlers of the realtime consumer, per dialect (§4–§6, §8.2, §9).

Each handler validates first and changes state after (STYLE 18); CPU-heavy audio steps run off
the loop but are awaited here, so events keep receive order (AR-2). ``ProtocolError`` and
``ConfigError`` raised here become one ``error`` event in the consumer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

import pybase64
from django.conf import settings

from accounts.exceptions import AdmissionDenied
from asr import wire
from asr.config import (
    VLLM_RATE,
    Models,
    SessionConfig,
)
from asr.protocol import ClientEvent, ProtocolError
from asr.session import Dialect
from asr.updates import validate_update, validate_vllm_update
from asr.vad import AudioFrontEnd

BASE64_INLINE_LIMIT = 64 * 1024  # AR-2: larger payloads are decoded off the loop


class RealtimeHandlers(wire.RealtimeSender):
    """``on_*`` handlers of client events, and the dialect's handler table."""

    front: AudioFrontEnd

    def models(self) -> Models:
        """The served model, its aliases and whether it is English-only (SE-15, row 8)."""
        version = self.link.model_version if self.link is not None else ""
        return Models(
            served=settings.ASR_MODEL,
            aliases=tuple(settings.ASR_MODEL_ALIASES),
            english_only=settings.ASR_MODEL.endswith(".en") or version.endswith(".en"),
            max_prompt_chars=settings.ASR_MAX_PROMPT_CHARS,
        )

    @property
    def vllm(self) -> bool:
        """True in the vLLM dialect."""
        return self.session.dialect is Dialect.VLLM

    def handlers(self) -> dict[str, Callable[[ClientEvent], Awaitable[None]]]:
        """The dialect's client event handlers (the parse table decides which exist)."""
        if self.vllm:
            return {
                "session.update": self.on_vllm_update,
                "input_audio_buffer.append": self.on_append,
                "input_audio_buffer.commit": self.on_vllm_commit,
            }
        return {
            "session.update": self.on_session_update,
            "transcription_session.update": self.on_beta_update,
            "input_audio_buffer.append": self.on_append,
            "input_audio_buffer.commit": self.on_commit,
            "input_audio_buffer.clear": self.on_clear,
        }

    async def set_dialect(self, dialect: Dialect) -> None:
        """Fix the dialect (DI-3); vLLM input is PCM16 at 16 kHz (AI-6)."""
        self.session.dialect = dialect
        if dialect is Dialect.VLLM:
            self.session.beta = False
            config = self.session.config
            await self.apply_config(replace(config, format="audio/pcm", rate=VLLM_RATE))

    # OpenAI dialect.

    async def on_session_update(self, event: ClientEvent) -> None:
        """SE-5 to SE-9: validate everything, then change, then session.updated."""
        new = self.validated(event, beta=False)
        await self.apply_config(new)
        await self.send_json(self.session_updated())

    async def on_beta_update(self, event: ClientEvent) -> None:
        """SE-12: the beta update marks the client beta and answers in beta shape."""
        new = self.validated(event, beta=True)
        self.session.beta = True
        await self.apply_config(new)
        await self.send_json(self.beta_session_updated())

    def validated(self, event: ClientEvent, *, beta: bool) -> SessionConfig:
        """The configuration after a GA or beta update (SE-6: nothing changes on error)."""
        return validate_update(
            event.body.get("session"), self.session.config, self.models(), beta=beta
        )

    async def apply_config(self, new: SessionConfig) -> None:
        """Format changes flush the resampler into the current item (AI-4)."""
        old = self.session.config
        had_vad = self.session.needs_vad
        if (new.format, new.rate) != (old.format, old.rate):
            pcm, probs = await asyncio.to_thread(
                self.front.reformat, new.format, new.rate, vad=had_vad
            )
            await self.perform(self.session.ingest(pcm, probs, 0.0))
        await self.perform(self.session.configure(new))
        if self.session.needs_vad and not had_vad:
            self.front.vad.reset()
            self.session.detector.reset(self.session.clock)

    async def on_append(self, event: ClientEvent) -> None:
        """AI-1: validate, decode off the loop, reserve quota (MT-3), ingest, forward."""
        audio = event.body.get("audio")
        if not isinstance(audio, str):
            raise ProtocolError(
                "invalid_value", wire.message("invalid_audio_value"), "audio"
            )
        if not audio:
            return
        payload = await self.b64decode(audio)
        pcm16 = self.session.config.format == "audio/pcm"
        if pcm16 and len(payload) % 2:
            raise ProtocolError(
                "invalid_audio_format", wire.message("invalid_audio_format"), "audio"
            )
        rate = self.session.config.rate
        width = 2 if pcm16 else 1
        samples = len(payload) // width
        try:
            accepted = await self.meter_reserve_audio(samples, rate)
        except AdmissionDenied as denied:  # limits_unavailable
            await self.stop(denied.reason)
            return
        if accepted:
            await self.accept_audio(payload[: accepted * width], accepted, rate)
        if accepted < samples:  # the rest is dropped, unmetered (MT-3, accounts Q8)
            await self.stop("quota_exceeded")

    async def accept_audio(self, payload: bytes, samples: int, rate: int) -> None:
        """AI-1 step 5–7 for audio within the reservations; metered unless it overflowed."""
        self.stats["input_bytes"] += len(payload)
        pcm, probs = await asyncio.to_thread(
            self.front.process, payload, vad=self.session.needs_vad
        )
        await self.perform(self.session.ingest(pcm, probs, samples * 1000 / rate))
        if not self.closed():  # an overflowing append is discarded, unmetered (AI-1.6)
            self.meter_audio(samples, rate)

    async def b64decode(self, audio: str) -> bytes:
        """Strict base64 (AI-1 step 3), off the loop when large (AR-2)."""
        try:
            if len(audio) > BASE64_INLINE_LIMIT:
                return await asyncio.to_thread(pybase64.b64decode, audio, validate=True)
            return pybase64.b64decode(audio, validate=True)
        except ValueError:
            raise ProtocolError(
                "invalid_audio", wire.message("invalid_audio"), "audio"
            ) from None

    async def on_commit(self, event: ClientEvent) -> None:
        """IT-2 to IT-4: flush, check the minimum, commit."""
        await self.flush_resampler()
        short = self.session.commit_ready(settings.ASR_MIN_COMMIT_MS)
        if short is not None:
            raise ProtocolError(
                "input_audio_buffer_commit_empty",
                wire.message("commit_empty", min=settings.ASR_MIN_COMMIT_MS, ms=short),
            )
        await self.perform(self.session.commit())

    async def flush_resampler(self) -> None:
        """The resampler's pending output belongs to the item being committed (AI-4)."""
        pcm, probs = await asyncio.to_thread(
            self.front.flush, vad=self.session.needs_vad
        )
        if pcm:
            await self.perform(self.session.ingest(pcm, probs, 0.0))

    async def on_clear(self, event: ClientEvent) -> None:
        """IT-14: drop the item, reset the resampler and the VAD, then cleared."""
        pcm, _ = await asyncio.to_thread(self.front.flush, vad=False)
        self.session.clock += len(pcm) // 2
        self.front.reset()
        await self.perform(self.session.clear())
        await self.send_json(wire.cleared())

    # vLLM dialect.

    async def on_vllm_update(self, event: ClientEvent) -> None:
        """VL-2: validate the model, then session.updated{model}."""
        new = validate_vllm_update(event.body, self.session.config, self.models())
        self.session.model_validated = True
        await self.apply_config(new)
        await self.send_json(wire.vllm_session_updated(new.model))

    async def on_vllm_commit(self, event: ClientEvent) -> None:
        """VL-3 to VL-5: a non-final commit starts the item, a final one ends it."""
        if not self.session.model_validated:
            raise ProtocolError(
                "model_not_validated", wire.message("model_not_validated")
            )
        if event.body.get("final") is True:
            await self.flush_resampler()
            await self.perform(self.session.commit())
        else:
            await self.perform(self.session.start_generation())
