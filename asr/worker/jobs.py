"""The worker side of a realtime ASR session: per-item PCM buffers and decodes (realtime §13–§14).

The gateway sends each new 16 kHz sample once (WK-5); ``receive`` appends it at once and wakes the
item's task (WK-6). With ``stream`` set, the task runs a chunk decode whenever ``ASR_CHUNK_S`` of
new audio arrived since the last decode started, at most one at a time per item, so a slow engine
skips intermediate states instead of queueing them (SA-2). At commit the in-flight chunk decode is
cancelled and the final decode runs with priority over every chunk decode of the process (SA-7):
chunk decodes ask the engine for background priority, and the gate never holds a final for one.
With the ``final`` transcript option (issue 34) the final decode is ``final_request``: the
item's whole audio decoded as a whole-file transcription decodes it; the decode that starts
once the speech has paused is that same decode, so a commit after the pause reuses it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import numpy as np
from django.conf import settings

from asr.audio import loud_end
from asr.messages import (
    DELTAS,
    AsrAudio,
    AsrCommit,
    AsrDelta,
    AsrDrop,
    AsrFinal,
    AsrItemOpen,
    AsrOpen,
    AsrResync,
)
from asr.whisper import MODEL_RATE
from asr.worker.cadence import Cadence, WorkerItem
from asr.worker.engines.base import (
    AsrDecodeRequest,
    AsrEngine,
    AsrHypothesis,
    final_request,
)
from asr.worker.gate import decode_gate
from asr.worker.hypothesis import timed_segments, timed_words
from asr.worker.streaming import DecodePlan, WordStreamState
from gateway.contracts import JobFailed, Kind, Message
from gateway.worker.jobs import ReplyLost, Sender

logger = logging.getLogger(__name__)

FINAL_ATTEMPTS = 2  # WK-8: a failed final decode is retried once
STALE_JOB_GRACE_S = 60  # WK-9: a job older than ASR_MAX_SESSION_S + this is dropped


def followed_both_samples(opened: AsrItemOpen) -> int:
    """Until when an item's words need the previous hypothesis to hold a word after them too
    (SA-5): ``ASR_AGREE_FOLLOWED_BOTH_S`` when the deltas are the transcript (``deltas``);
    none with ``final``, whose transcript replaces the preview, so a word misheard in the
    first second or two costs the preview only (issue 34: first delta 0.98 s instead of
    1.18 s at 4 sessions, preview WER 6.6 against 6.0 %)."""
    if opened.transcript != DELTAS:
        return 0
    return int(settings.ASR_AGREE_FOLLOWED_BOTH_S * MODEL_RATE)


class AsrJob:
    """One realtime session in a worker slot: items keyed by ``item_seq``."""

    kind: Kind = "asr"

    def __init__(self, open_: AsrOpen, engine: AsrEngine, send: Sender) -> None:
        self.job_id = open_.job_id
        self.reply_channel = open_.reply_channel
        self.engine = engine
        self.send = send
        self.items: dict[int, WorkerItem] = {}
        self.gate = decode_gate(engine)
        self.cadence = Cadence(self.gate)
        self.max_samples = int(settings.ASR_MAX_BUFFER_S * MODEL_RATE)
        self.silence_dbfs = settings.ASR_SILENCE_DBFS
        self.pause_confirm = settings.ASR_PAUSE_CONFIRM
        context_s = settings.ASR_CHUNK_CONTEXT_S
        self.chunk_context_s = context_s if 0 < context_s < 30 else None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def run(self) -> None:
        """Live until cancelled (or stale, WK-9); cancel every item task on the way out."""
        limit = settings.ASR_MAX_SESSION_S + STALE_JOB_GRACE_S
        try:
            await asyncio.sleep(limit)
            logger.warning("asr job %s dropped: older than %d s", self.job_id, limit)
        finally:
            for seq in list(self.items):
                self._forget(seq)
            for task in self._tasks:
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Start a task the job owns; ``run`` cancels and awaits it (STYLE 22)."""
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # Pinned messages, one method per channel type (the worker consumer's handlers call
    # them): applied now, without blocking; decoding happens in the item's task.

    def item_open(self, opened: AsrItemOpen) -> None:
        """asr.job.item_open: start an item, or update its options (WK-3)."""
        item = self.items.get(opened.item_seq)
        if item is not None:
            item.options = opened
            item.state.logprobs = opened.logprobs
            item.wake.set()
            return
        state = WordStreamState.resumed(
            opened.prefix_text,
            prompt=opened.prompt,
            chunk_samples=int(settings.ASR_CHUNK_S * MODEL_RATE),
            window_samples=int(settings.ASR_WINDOW_S * MODEL_RATE),
            unfixed_words=settings.ASR_UNFIXED_WORDS,
            unfixed_chunks=settings.ASR_UNFIXED_CHUNKS,
            agree_samples=int(settings.ASR_AGREE_S * MODEL_RATE),
            agree_followed=settings.ASR_AGREE_FOLLOWED,
            followed_both_samples=followed_both_samples(opened),
            logprobs=opened.logprobs,
            transcript=opened.transcript,
        )
        item = WorkerItem(seq=opened.item_seq, options=opened, state=state)
        self.items[item.seq] = item
        item.task = self._spawn(self._drive(item))

    def audio(self, audio: AsrAudio) -> None:
        """asr.job.audio: append PCM at its offset, or ask for a resync (WK-6)."""
        item = self.items.get(audio.item_seq)
        if item is None:
            return
        if audio.offset != item.samples:
            self._resync(item)
            return
        item.resync_pending = False
        room = max(0, self.max_samples - item.samples)
        pcm = audio.pcm[: 2 * room]
        end = loud_end(np.frombuffer(pcm, dtype="<i2"), item.samples, self.silence_dbfs)
        item.pcm.extend(pcm)
        if end is not None:
            item.speech_end = end
        item.wake.set()

    def commit(self, commit: AsrCommit) -> None:
        """asr.job.commit: the item is complete; its final decode replaces a chunk one."""
        item = self.items.get(commit.item_seq)
        if item is None:
            return
        item.commit_total = min(commit.total_samples, self.max_samples)
        if item.samples < item.commit_total:
            self._resync(item)
        if item.chunk is not None and not self.cadence.will_cover(item):
            item.chunk.cancel()  # SA-7: the final decode replaces it
        item.wake.set()

    def drop(self, drop: AsrDrop) -> None:
        """asr.job.drop: forget the item (the client cleared the buffer)."""
        self._forget(drop.item_seq)

    def _forget(self, seq: int) -> None:
        item = self.items.pop(seq, None)
        if item is None:
            return
        for task in (item.chunk, item.task):
            if task is not None:
                task.cancel()

    def _resync(self, item: WorkerItem) -> None:
        if item.resync_pending:
            return
        item.resync_pending = True
        resync = AsrResync(
            job_id=self.job_id, item_seq=item.seq, have_samples=item.samples
        )
        self._spawn(self._send_quietly(resync))

    async def _drive(self, item: WorkerItem) -> None:
        """The item's loop: chunk decodes while audio arrives, then the final decode."""
        try:
            while True:
                await item.wake.wait()
                item.wake.clear()
                total = item.commit_total
                if total is not None and item.samples >= total:
                    await self._final(item, total)
                    return
                if (
                    total is None
                    and item.options.stream
                    and self.cadence.chunk_due(item)
                ):
                    if not await self._chunk(item):
                        return
        except ReplyLost:
            logger.warning("asr job %s: gateway gone", self.job_id)
        except Exception:  # boundary: one item; its client must not wait for ever
            logger.exception("asr job %s item %d failed", self.job_id, item.seq)
            stage = "final" if item.commit_total is not None else "chunk"
            await self._send_quietly(self._failed(item, stage))
        finally:
            if self.items.get(item.seq) is item:
                del self.items[item.seq]

    def _failed(self, item: WorkerItem, stage: str) -> JobFailed:
        """WK-8: the item's decode failed at ``stage`` ("chunk" or "final")."""
        return JobFailed(
            job_id=self.job_id,
            code="inference_failed",
            stage=stage,
            item_seq=item.seq,
        )

    async def _chunk(self, item: WorkerItem) -> bool:
        """One chunk decode; False when it failed and the job must end (IT-13)."""
        item.decoded_at = item.samples
        after_pause = self.cadence.after_pause(item)
        item.speculative = self.cadence.may_be_final(item)
        plan = self._chunk_plan(item)
        item.chunk = self._spawn(
            self._decode(item, plan, item.samples, final=item.speculative)
        )
        try:
            await asyncio.wait({item.chunk})
            if item.chunk.cancelled():
                return True
            hyp = item.chunk.result()
        except asyncio.CancelledError:
            item.chunk.cancel()
            raise
        except Exception:  # boundary: one chunk decode
            logger.exception(
                "asr job %s item %d: chunk decode failed", self.job_id, item.seq
            )
            await self.send(self._failed(item, "chunk"))
            return False
        finally:
            item.chunk = None
        item.last_chunk = (hyp, plan, item.decoded_at)
        # Audio ending in a pause: nothing after it can change the words (issue 13), when
        # they are a full-context decode's (the final's own; a short one may misspell them).
        settled = self.pause_confirm and after_pause and hyp.full_context
        emission = item.state.on_chunk(hyp, plan, settled=settled)
        if emission is not None and emission.text:
            await self.send(
                AsrDelta(
                    job_id=self.job_id,
                    item_seq=item.seq,
                    text=emission.text,
                    logprobs=emission.logprobs,
                )
            )
        if self.cadence.chunk_due(item):
            item.wake.set()  # audio arrived while decoding: decode the latest state
        return True

    def _chunk_plan(self, item: WorkerItem) -> DecodePlan:
        """The next chunk decode: with the ``final`` option, a likely final is the final
        decode itself (a whole decode), so that the commit can reuse it (issue 34)."""
        state, total = item.state, item.samples
        if item.speculative and state.final_is_whole:
            return state.whole_plan(total, words=item.options.words, final=False)
        return state.plan(total, final=False)

    async def _final(self, item: WorkerItem, total: int) -> None:
        started = time.monotonic()
        decoded = self.cadence.reusable(item, total) or await self._final_decode(
            item, total
        )
        if decoded is None:
            return
        hyp, plan = decoded
        final = item.state.on_final(hyp, plan)
        await self.send(
            AsrFinal(
                job_id=self.job_id,
                item_seq=item.seq,
                text=final.remainder.text,
                prompt_tokens=hyp.prompt_tokens,
                completion_tokens=hyp.completion_tokens,
                logprobs=final.remainder.logprobs,
                audio_ms=total * 1000 // MODEL_RATE,
                decode_ms=int((time.monotonic() - started) * 1000),
                # Times of the transcript's words: the final decode's, when it is one.
                words=timed_words(hyp, plan.start, plan.end)
                if item.options.words and final.transcript is not None
                else None,
                transcript=final.transcript,
                transcript_logprobs=final.logprobs,
                segments=timed_segments(hyp, plan.start)
                if item.options.segments
                else None,
                language=hyp.language,
            )
        )

    async def _final_decode(
        self, item: WorkerItem, total: int
    ) -> tuple[AsrHypothesis, DecodePlan] | None:
        """The full final decode and its plan, retried once (WK-8); None when it failed."""
        plan = item.state.final_plan(total, words=item.options.words)
        for attempt in range(1, FINAL_ATTEMPTS + 1):
            try:
                return await self._decode(item, plan, total), plan
            except Exception:  # boundary: one final decode
                logger.exception(
                    "asr job %s item %d: final decode failed (attempt %d)",
                    self.job_id,
                    item.seq,
                    attempt,
                )
        await self.send(self._failed(item, "final"))
        return None

    async def _decode(
        self,
        item: WorkerItem,
        plan: DecodePlan,
        total: int,
        *,
        final: bool | None = None,
    ) -> AsrHypothesis:
        """Decode ``plan`` up to ``total`` as a final or chunk decode (default: the plan's)."""
        final = plan.final if final is None else final
        audio = item.audio(plan.start)[: total - plan.start]
        options = item.options
        if final:
            request = final_request(
                audio,
                prompt=plan.prompt,
                prefix=plan.prefix,
                language=options.language,
                words=plan.words or (plan.final and options.words),
                logprobs=item.state.logprobs,
                segments=plan.final and options.segments,
            )
        else:
            request = AsrDecodeRequest(
                audio=audio,
                prompt=plan.prompt,
                prefix=plan.prefix,
                language=options.language,
                word_timestamps=plan.words,
                logprobs=item.state.logprobs,
                background=True,
                context_s=self.chunk_context_s,
            )
        async with self.gate.slot(final=final):
            return await self.engine.decode(request)

    async def _send_quietly(self, message: Message) -> None:
        try:
            await self.send(message)
        except Exception:  # boundary: a message that cannot be delivered
            logger.warning("asr job %s: %s not delivered", self.job_id, message.TYPE)
