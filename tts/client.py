"""One TTS job run from outside a consumer (``POST /v1/tts``), on a private channel.

A view has no dispatch loop, so it receives on a channel of its own (``new_channel()``) and feeds
every message to the same ``WorkerLink`` the consumers use: the same admission retries, busy /
not_ready / no-answer handling (Q3), pinning, ``tts.job.cancel`` of late acceptances (Q4) and
stall detection (Z4). Audio is collected into a spooled temporary file (H3).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import IO, Any

from channels.layers import BaseChannelLayer
from django.conf import settings

from gateway.link.jobclient import TIMER, Outcome, Phase, WorkerLink
from gateway.link.receiving import receive_until
from tts.errors import outcome_error
from tts.messages import ChunkOrder, TtsAck, TtsChunk, TtsDone, TtsSubmit

logger = logging.getLogger(__name__)

SPOOL_BYTES = 8 * 1024 * 1024  # H3: bodies above this go to a temporary file
LINK_REPLIES = ("gpu.job.accepted", "gpu.job.busy", "gpu.job.not_ready")


def link_options() -> dict[str, Any]:
    """A TTS job's ``WorkerLink`` options (Q3, Z4), for the consumer and the REST client."""
    return {
        "kind": "tts",
        "answer_ms": settings.TTS_WORKER_ANSWER_MS,
        "wait_ms": settings.TTS_ADMISSION_WAIT_MS,
        "stall_s": settings.TTS_WORKER_STALL_S,
    }


class JobError(Exception):
    """The job ended without audio: a §6 code and its fixed message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class JobAudio:
    """The job's audio: final-format bytes in ``body`` after ``offset`` bytes of room,
    and its word timestamps when the job marked them (issue 35)."""

    body: IO[bytes]
    data_bytes: int
    samples: int
    model_version: str
    words: list[dict[str, Any]] = field(default_factory=list, repr=False)


class ChannelJob:
    """Submit one job and collect its audio, answering flow control as the consumer does."""

    def __init__(
        self,
        layer: BaseChannelLayer,
        *,
        header_room: int = 0,
    ) -> None:
        self.layer = layer
        self.header_room = header_room  # bytes left free at the start of the body
        self.link: WorkerLink | None = None
        self.channel = ""

    async def run(
        self,
        first: TtsSubmit,
        *,
        timeout_s: float,
        rate: int,
    ) -> JobAudio:
        """Run the job (its audio at ``rate``) to its end; raise JobError, or TimeoutError
        past ``timeout_s``."""
        body = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
        body.write(bytes(self.header_room))
        data_bytes = samples = 0
        words: list[dict[str, Any]] = []
        try:
            async with contextlib.aclosing(
                self.stream(first, timeout_s=timeout_s)
            ) as chunks:
                async for chunk in chunks:
                    words += chunk.timed_words(samples * 1000 / rate)
                    body.write(chunk.data)
                    data_bytes += len(chunk.data)
                    samples += chunk.samples
        except BaseException:
            body.close()
            raise
        model = self.link.model_version if self.link is not None else ""
        return JobAudio(body, data_bytes, samples, model, words)

    async def stream(
        self, first: TtsSubmit, *, timeout_s: float
    ) -> AsyncGenerator[TtsChunk, None]:
        """The job's chunks as they arrive (OpenAI speech streaming); raise JobError,
        or TimeoutError past ``timeout_s``. Closing the iterator early stops the job."""
        self.channel = await self.layer.new_channel("tts-rest.")
        link = self.link = WorkerLink(
            layer=self.layer, own_channel=self.channel, **link_options()
        )
        deadline = time.monotonic() + timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                outcome = await link.submit(first)
                await self._check(link, outcome)
            async for chunk in self._chunks(link, deadline):
                yield chunk
        except BaseException:
            await asyncio.shield(self.withdraw())
            raise
        finally:
            await link.close()
            link.forget()

    async def withdraw(self) -> None:
        """Z2/Q4: stop the job; one still being admitted is cancelled when it is accepted."""
        link = self.link
        if link is None:
            return
        deadline = time.monotonic() + link.answer_s + link.wait_s
        while link.phase is Phase.SUBMITTING and time.monotonic() < deadline:
            # Not a cancelled receive: it can lose another stream's message
            # (gateway.link.receiving).
            left = deadline - time.monotonic()
            message = await receive_until(self.layer, self.channel, left)
            if message is None:
                break
            if message["type"] == "gpu.job.accepted":
                await link.on_reply(message)  # ACCEPTED; close() below cancels it
                break
            if message["type"] in LINK_REPLIES:
                break  # busy or not ready: nothing runs
        await link.close()

    async def _check(self, link: WorkerLink, outcome: Outcome | None) -> None:
        if outcome is Outcome.ACCEPTED:
            await link.send(
                TtsAck(job_id=link.job_id, seq=-1)
            )  # confirm (tts.worker.jobs)
        elif outcome is not None:
            code, message, _ = outcome_error(outcome)
            raise JobError(code, message)

    async def _chunks(
        self, link: WorkerLink, deadline: float
    ) -> AsyncGenerator[TtsChunk, None]:
        order = ChunkOrder(window=settings.TTS_CHUNK_WINDOW)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            async with asyncio.timeout(left):
                message: dict[str, Any] = await self.layer.receive(self.channel)
            kind = message["type"]
            if kind == TIMER:
                await self._check(link, await link.on_timer(message))
            elif kind in LINK_REPLIES:
                await self._check(link, await link.on_reply(message))
            elif not link.touch(message):
                continue
            elif kind == TtsChunk.TYPE:
                chunk = TtsChunk.from_message(message)
                if not order.take(chunk.seq):
                    raise JobError("INTERNAL_ERROR", "Audio stream interrupted")
                if order.ack_due:
                    await link.send(TtsAck(job_id=chunk.job_id, seq=chunk.seq))
                yield chunk
            elif kind == TtsDone.TYPE:
                if not order.complete(TtsDone.from_message(message).chunks):
                    raise JobError("INTERNAL_ERROR", "Audio stream interrupted")
                return
            elif kind == "gpu.job.failed":
                raise JobError("INTERNAL_ERROR", "Synthesis failed")
