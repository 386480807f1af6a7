"""One ASR job run from outside a consumer (``POST /v1/audio/transcriptions``), on a private
channel.

Like ``tts.client`` for ``POST /v1/tts``: a view has no dispatch loop, so it receives on a
channel of its own and feeds every reply and timer to the same ``WorkerLink`` the realtime
consumer uses (admission retries, busy / not_ready / no answer, pinning, keepalives, stall
detection, the cancel of late acceptances). The file's pieces are items of one job: each is
opened, sent as 500 ms ``asr.job.audio`` messages and committed at once, so the worker holds
them all and decodes each with its final decode (with Whisper's segments); the texts come back
in item order.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from channels.layers import BaseChannelLayer
from django.conf import settings

from asr.messages import AsrAudio, AsrCommit, AsrFinal, AsrItemOpen, AsrOpen, AsrResync
from asr.whisper import MODEL_RATE
from gateway.contracts import JobFailed, Message
from gateway.link.jobclient import TIMER, Outcome, Phase, WorkerLink

AUDIO_SAMPLES = MODEL_RATE // 2  # 500 ms per message (STYLE 24)
FULL_RETRY_S = 0.05  # the worker's channel is full: send again after this
LINK_REPLIES = ("gpu.job.accepted", "gpu.job.busy", "gpu.job.not_ready")


class AsrJobError(Exception):
    """The job ended without a transcript: the link's outcome, or ``inference_failed``."""

    def __init__(self, outcome: Outcome | None) -> None:
        super().__init__(outcome.value if outcome else "inference_failed")
        self.outcome = outcome


@dataclass(frozen=True)
class PieceText:
    """The transcript of one piece (item) of the file: its final decode's text, Whisper
    segments (``asr.worker.hypothesis.timed_segments``) and timed words, in piece seconds,
    and the language it was decoded in."""

    seq: int
    text: str = field(repr=False)
    audio_ms: int
    completion_tokens: int
    words: list[dict[str, Any]] | None = field(default=None, repr=False)
    segments: list[dict[str, Any]] | None = field(default=None, repr=False)
    # The language the worker decoded the piece in; None when it did not say.
    language: str | None = None


class FileJob:
    """Transcribe pieces of one file's 16 kHz PCM on one worker, in order."""

    def __init__(
        self,
        layer: BaseChannelLayer,
        *,
        job_id: str,
        language: str | None,
        prompt: str,
        words: bool = False,
    ) -> None:
        self.layer, self.job_id = layer, job_id
        self.language, self.prompt, self.words = language, prompt, words
        self.link: WorkerLink | None = None
        self.channel = ""
        self._outbox: asyncio.Queue[Message] = asyncio.Queue()
        self._pcm: npt.NDArray[np.int16] = np.zeros(0, dtype=np.int16)
        self._pieces: list[tuple[int, int]] = []

    async def transcribe(
        self,
        pcm: npt.NDArray[np.int16],
        pieces: list[tuple[int, int]],
        *,
        timeout_s: float,
    ) -> AsyncGenerator[PieceText, None]:
        """Yield each piece's text in order; raise AsrJobError, or TimeoutError past
        ``timeout_s``. Closing the iterator early cancels the job."""
        self._pcm, self._pieces = pcm, pieces
        self.channel = await self.layer.new_channel("asr-rest.")
        link = self.link = WorkerLink(
            layer=self.layer,
            own_channel=self.channel,
            kind="asr",
            answer_ms=settings.ASR_WORKER_ANSWER_MS,
            wait_ms=settings.ASR_ADMISSION_WAIT_MS,
            stall_s=settings.ASR_WORKER_STALL_S,
        )
        deadline = time.monotonic() + timeout_s
        sender: asyncio.Task[None] | None = None
        try:
            first = AsrOpen.first(settings.ASR_MODEL)
            outcome = await link.submit(first, job_id=self.job_id)
            while outcome is not Outcome.ACCEPTED:
                if outcome is not None:
                    raise AsrJobError(outcome)
                message = await self._receive(deadline)
                if message["type"] == TIMER:
                    outcome = await link.on_timer(message)
                elif message["type"] in LINK_REPLIES:
                    outcome = await link.on_reply(message)
            for seq in range(len(pieces)):
                self._queue_item(seq, 0, opened=False)
            sender = asyncio.create_task(self._send_all(link))
            async for text in self._texts(link, deadline, sender):
                yield text
        finally:
            if sender is not None:
                sender.cancel()
                with contextlib.suppress(BaseException):
                    await sender
            await asyncio.shield(self._withdraw(link))

    def _queue_item(self, seq: int, offset: int, *, opened: bool) -> None:
        """Queue an item's open (unless ``opened``), its audio from ``offset``, its commit."""
        job_id = self.link.job_id if self.link is not None else self.job_id
        start, end = self._pieces[seq]
        if not opened:
            self._outbox.put_nowait(
                AsrItemOpen(
                    job_id=job_id,
                    item_seq=seq,
                    language=self.language,
                    prompt=self.prompt,
                    words=self.words,
                    segments=True,
                )
            )
        for at in range(offset, end - start, AUDIO_SAMPLES):
            pcm = self._pcm[start + at : min(end, start + at + AUDIO_SAMPLES)]
            self._outbox.put_nowait(
                AsrAudio(
                    job_id=job_id,
                    item_seq=seq,
                    offset=at,
                    pcm=pcm.astype("<i2").tobytes(),
                )
            )
        self._outbox.put_nowait(
            AsrCommit(job_id=job_id, item_seq=seq, total_samples=end - start)
        )

    async def _send_all(self, link: WorkerLink) -> None:
        """Send queued messages in order, waiting while the worker's channel is full."""
        while True:
            message = await self._outbox.get()
            while link.phase is Phase.ACCEPTED and not await link.send(message):
                await asyncio.sleep(FULL_RETRY_S)

    async def _texts(
        self, link: WorkerLink, deadline: float, sender: asyncio.Task[None]
    ) -> AsyncGenerator[PieceText, None]:
        done: dict[int, PieceText] = {}
        next_seq = 0
        while next_seq < len(self._pieces):
            if sender.done():
                sender.result()  # the sender never ends by itself: raise its error
            message = await self._receive(deadline)
            kind = message["type"]
            if kind == TIMER:
                outcome = await link.on_timer(message)
                if outcome is not None:
                    raise AsrJobError(outcome)
            elif kind in LINK_REPLIES:
                await link.on_reply(message)  # a late acceptance elsewhere: cancelled
            elif not link.touch(message):
                continue
            elif kind == AsrFinal.TYPE:
                final = AsrFinal.from_message(message)
                done[final.item_seq] = PieceText(
                    seq=final.item_seq,
                    # No deltas precede it: the remainder is the whole transcript.
                    text=final.text if final.transcript is None else final.transcript,
                    audio_ms=final.audio_ms,
                    completion_tokens=final.completion_tokens,
                    words=final.words,
                    segments=final.segments,
                    language=final.language,
                )
                while next_seq in done:
                    yield done.pop(next_seq)
                    next_seq += 1
            elif kind == AsrResync.TYPE:
                resync = AsrResync.from_message(message)
                self._queue_item(resync.item_seq, resync.have_samples, opened=True)
            elif kind == JobFailed.TYPE:
                raise AsrJobError(None)

    async def _receive(self, deadline: float) -> dict[str, Any]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        async with asyncio.timeout(left):
            message: dict[str, Any] = await self.layer.receive(self.channel)
        return message

    async def _withdraw(self, link: WorkerLink) -> None:
        """Cancel the job; one still being admitted is cancelled when it is accepted."""
        if link.phase is Phase.SUBMITTING:
            link.abandon()  # reads our channel until no acceptance can still come
            return
        await link.close()
