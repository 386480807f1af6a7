"""Incremental text input for the TTS consumer (specs/tts-ws.md §9.2, C2).

Text is buffered and cut into segments as sentences complete (I3); segments, flushes, the end and
clears go to the pinned worker in order, or wait in ``pending`` until the job is accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from django.conf import settings

from accounts.exceptions import AdmissionDenied
from gateway.contracts import Message
from gateway.jobclient import Phase
from tts.messages import TtsClear, TtsEnd, TtsFlush, TtsText
from tts.prepare import prepare_pieces
from tts.protocol import End, Flush, TextInput
from tts.session import RequestState
from tts.text import Segment

if TYPE_CHECKING:
    from tts.consumers import TtsConsumer

PendingKind = Literal["text", "flush", "end", "clear"]
AUDIO_STALE_S = (
    10.0  # I6: outstanding segments with no audio for this long count as done
)


class IncrementalInput:
    """The consumer's §9.2 state machine around the active request's ``TextBuffer``."""

    def __init__(self, consumer: TtsConsumer) -> None:
        self.consumer = consumer
        self.pending: list[tuple[PendingKind, Callable[[str], Message]]] = []

    async def accepted(self) -> None:
        """The job is pinned: send what arrived while it was being admitted."""
        pending, self.pending = self.pending, []
        for _, build in pending:
            await self._to_worker("text", build)
        active = self.consumer.active
        if active.request.incremental and not active.ended:
            self.consumer.timers.arm("input", settings.TTS_INPUT_IDLE_S)

    async def on_event(self, event: TextInput | Flush | End) -> None:
        """Apply ``text``, ``flush`` or ``end`` to the active incremental request."""
        if self.consumer.active.ended:
            await self.consumer.warn("IGNORED_MESSAGE", "The request has ended (I5)")
        elif isinstance(event, TextInput):
            await self.on_text(event.text)
        elif isinstance(event, Flush):
            await self.on_flush(event.flush_id)
        else:
            await self.on_end()

    async def on_text(self, text: str) -> None:
        """I2–I3: reserve the unit, buffer it, send the segments that are complete."""
        consumer, active = self.consumer, self.consumer.active
        if not text:
            return
        total = active.text_chars + len(text)
        if total > settings.TTS_MAX_TEXT_CHARS:
            await consumer.fail(
                "VALIDATION_ERROR",
                f"Text too long: {total} chars (max {settings.TTS_MAX_TEXT_CHARS})",
            )
            return
        try:
            await consumer.usage.reserve_text(chars=len(text))
        except AdmissionDenied as denied:  # I2: fatal, before the unit's audio
            await consumer.deny(denied, fatal=True)
            return
        active.text_chars = total
        assert active.buffer is not None
        await self._send_segments(active.buffer.append(text))
        delay_ms = settings.TTS_MAX_BUFFER_DELAY_MS
        if active.buffer.pending and delay_ms > 0:
            consumer.timers.arm("buffer", delay_ms / 1000)
        else:
            consumer.timers.disarm("buffer")

    async def on_flush(self, given: str | int | None) -> None:
        """I4: everything buffered goes to the worker, then the flush mark."""
        active = self.consumer.active
        assert active.buffer is not None
        await self._send_segments(active.buffer.drain())
        self.consumer.timers.disarm("buffer")
        flush_id, epoch = active.next_flush_id(given), active.epoch
        await self._to_worker(
            "flush", lambda job: TtsFlush(job_id=job, epoch=epoch, flush_id=flush_id)
        )

    async def on_end(self) -> None:
        """I5: a flush, then the worker finishes and ``complete`` follows its done."""
        active = self.consumer.active
        assert active.buffer is not None
        await self._send_segments(active.buffer.drain())
        active.ended = True
        self.consumer.timers.disarm("buffer", "input")
        epoch = active.epoch
        await self._to_worker("end", lambda job: TtsEnd(job_id=job, epoch=epoch))

    async def clear(self) -> None:
        """C2: drop buffered text and unsent audio; the request goes on in a new epoch."""
        consumer, active = self.consumer, self.consumer.active
        assert active.buffer is not None
        active.epoch += 1
        active.buffer.clear()
        active.outstanding.clear()
        consumer.timers.disarm("buffer")
        self.pending = [(kind, build) for kind, build in self.pending if kind != "text"]
        epoch = active.epoch
        await self._to_worker("clear", lambda job: TtsClear(job_id=job, epoch=epoch))
        if active.request.timestamps and active.open_segment is not None:
            await consumer.send_json(active.segment_end_event(active.open_segment))
        await consumer.send_json({"event": "cleared", "request_id": active.request_id})

    async def on_timer(self, name: str) -> None:
        """I3's buffer delay, and I6's input idle limit."""
        consumer, active = self.consumer, self.consumer.active
        if not active.request.incremental or active.buffer is None:
            return
        if name == "buffer":
            await self._send_segments(active.buffer.drain())
        elif name == "input" and not active.ended:
            if active.buffer.pending or active.audio_pending(AUDIO_STALE_S):
                consumer.timers.arm("input", settings.TTS_INPUT_IDLE_S)
                return
            idle = settings.TTS_INPUT_IDLE_S
            await consumer.fail("TIMEOUT", f"No text received within {idle:g} seconds")

    async def _send_segments(self, segments: list[Segment]) -> None:
        active = self.consumer.active
        if not segments:
            return
        assert active.buffer is not None
        payload = await prepare_pieces(
            active.buffer.text, segments, normalize=active.request.normalize
        )
        active.add_segments(
            [(s["seq"], s["char_start"], s["char_end"]) for s in payload]
        )
        if payload:
            epoch = active.epoch
            await self._to_worker(
                "text", lambda job: TtsText(job_id=job, epoch=epoch, segments=payload)
            )

    async def _to_worker(
        self, kind: PendingKind, build: Callable[[str], Message]
    ) -> None:
        consumer = self.consumer
        link = consumer.link
        streaming = consumer.active.state is RequestState.STREAMING
        if link is None or link.phase is not Phase.ACCEPTED or not streaming:
            self.pending.append((kind, build))
            return
        if not await link.send(build(link.job_id)):
            await consumer.fail("INTERNAL_ERROR", "Synthesis worker unavailable")
