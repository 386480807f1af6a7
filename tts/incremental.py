"""Incremental text input of one request (docs/specs/tts-ws.md §9.2, C2): state and pure steps.

Text is buffered and cut into segments as sentences complete (I3); segments, flushes, the end and
clears go to the pinned worker in order, or wait in ``pending`` until the job is accepted. Each
method returns the outputs for ``TtsConsumer.perform``.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings

from accounts.exceptions import AdmissionDenied
from gateway.contracts import Message
from gateway.wording import count
from tts.errors import denial_fail
from tts.events import Cleared, ServerWarning
from tts.messages import TtsClear, TtsEnd, TtsFlush, TtsText
from tts.outputs import (
    Arm,
    ClearInput,
    Disarm,
    Input,
    InputStep,
    Out,
    Send,
    ToWorker,
    TtsFail,
    WorkerKind,
)
from tts.protocol import End, Flush, TextInput
from tts.session import ActiveRequest, RequestState
from tts.text import Segment, TextBuffer, prepare_pieces
from tts.usage import TtsUsage

AUDIO_STALE_S = (
    10.0  # I6: outstanding segments with no audio for this long count as done
)


class IncrementalInput:
    """The §9.2 state machine around the active request's ``TextBuffer``."""

    def __init__(self, active: ActiveRequest) -> None:
        self.active = active
        self.pending: list[ToWorker] = []

    @property
    def buffer(self) -> TextBuffer:
        """The request's text buffer (incremental requests have one)."""
        assert self.active.buffer is not None
        return self.active.buffer

    def accepted(self) -> list[Out]:
        """The job is pinned: send what arrived while it was being admitted."""
        outs: list[Out] = list(self.pending)
        self.pending = []
        if self.active.request.incremental and not self.active.ended:
            outs.append(Arm("input", settings.TTS_INPUT_IDLE_S))
        return outs

    async def apply(self, step: InputStep, usage: TtsUsage) -> list[Out]:
        """One input step that ``tts.steps`` decided on."""
        if isinstance(step, Input):
            return await self.on_event(step.event, usage)
        if isinstance(step, ClearInput):
            return self.clear(usage)
        return await self.on_timer(step.name)

    async def on_event(
        self, event: TextInput | Flush | End, usage: TtsUsage
    ) -> list[Out]:
        """Apply ``text``, ``flush`` or ``end`` to the active incremental request."""
        if self.active.ended:
            return [
                Send(ServerWarning("IGNORED_MESSAGE", "The request has ended (I5)"))
            ]
        if isinstance(event, TextInput):
            return await self.on_text(event.text, usage)
        if isinstance(event, Flush):
            return await self.on_flush(event.flush_id)
        return await self.on_end()

    async def on_text(self, text: str, usage: TtsUsage) -> list[Out]:
        """I2–I3: reserve the unit, buffer it, send the segments that are complete."""
        active = self.active
        if not text:
            return []
        total, limit = active.text_chars + len(text), settings.TTS_MAX_TEXT_CHARS
        if total > limit:
            return [
                TtsFail(
                    "VALIDATION_ERROR", f"Text too long: {total} chars (max {limit})"
                )
            ]
        try:
            await usage.reserve_text(chars=len(text))
        except AdmissionDenied as denied:  # I2: fatal, before the unit's audio
            return [denial_fail(denied, fatal=True)]
        active.text_chars = total
        outs = await self._segments(self.buffer.append(text))
        delay_ms = settings.TTS_MAX_BUFFER_DELAY_MS
        if self.buffer.pending and delay_ms > 0:
            return [*outs, Arm("buffer", delay_ms / 1000)]
        return [*outs, Disarm(("buffer",))]

    async def on_flush(self, given: str | int | None) -> list[Out]:
        """I4: everything buffered goes to the worker, then the flush mark."""
        outs = await self._segments(self.buffer.drain())
        flush_id, epoch = self.active.next_flush_id(given), self.active.epoch
        return [
            *outs,
            Disarm(("buffer",)),
            *self._to_worker(
                "flush",
                lambda job: TtsFlush(job_id=job, epoch=epoch, flush_id=flush_id),
            ),
        ]

    async def on_end(self) -> list[Out]:
        """I5: a flush, then the worker finishes and ``complete`` follows its done."""
        outs = await self._segments(self.buffer.drain())
        self.active.ended = True
        epoch = self.active.epoch
        end = self._to_worker("end", lambda job: TtsEnd(job_id=job, epoch=epoch))
        return [*outs, Disarm(("buffer", "input")), *end]

    def clear(self, usage: TtsUsage) -> list[Out]:
        """C2: drop buffered text and unsent audio; the request goes on in a new epoch.

        The dropped text (not yet cut, or in segments whose audio had not all been sent)
        is not billed (docs/accounting.md).
        """
        active = self.active
        active.epoch += 1
        buffer = self.buffer
        outstanding = (active.spans[seq] for seq in active.outstanding)
        dropped = len(buffer.text) - buffer.cut_at
        usage.cleared(dropped + sum(s.char_end - s.char_start for s in outstanding))
        self.buffer.clear()
        active.outstanding.clear()
        self.pending = [out for out in self.pending if out.kind != "text"]
        epoch = active.epoch
        outs: list[Out] = [Disarm(("buffer",))]
        outs += self._to_worker("clear", lambda job: TtsClear(job_id=job, epoch=epoch))
        if active.request.timestamps and active.open_segment is not None:
            outs.append(Send(active.segment_end_event(active.open_segment)))
        return [*outs, Send(Cleared(request_id=active.request_id))]

    async def on_timer(self, name: str) -> list[Out]:
        """I3's buffer delay, and I6's input idle limit."""
        active = self.active
        if not active.request.incremental or active.buffer is None:
            return []
        if name == "buffer":
            return await self._segments(active.buffer.drain())
        if name != "input" or active.ended:
            return []
        idle = settings.TTS_INPUT_IDLE_S
        if active.buffer.pending or active.audio_pending(AUDIO_STALE_S):
            return [Arm("input", idle)]
        return [TtsFail("TIMEOUT", f"No text received within {count(idle, 'second')}")]

    async def _segments(self, segments: list[Segment]) -> list[Out]:
        if not segments:
            return []
        active = self.active
        payload = await prepare_pieces(self.buffer.text, segments)
        active.add_segments(
            [(s["seq"], s["char_start"], s["char_end"]) for s in payload]
        )
        if not payload:
            return []
        epoch = active.epoch
        return self._to_worker(
            "text", lambda job: TtsText(job_id=job, epoch=epoch, segments=payload)
        )

    def _to_worker(
        self, kind: WorkerKind, build: Callable[[str], Message]
    ) -> list[Out]:
        out = ToWorker(kind, build)
        if self.active.state is not RequestState.STREAMING:
            self.pending.append(out)
            return []
        return [out]
