"""The worker side of a TTS job: segments → engine → fades → resampler → ``gpu.tts.chunk``.

The worker owns the audio pipeline (tts Q8): joins, resampling, encoding and framing. Segments are
synthesised one at a time, in order, starting with the first as soon as the job is accepted (T8).
Incremental jobs (§9.2, and long texts sent in parts) get more segments, flushes, clears and the
end as later messages. The job keeps at most ``TTS_CHUNK_WINDOW`` chunks beyond the gateway's last
ack, pausing the engine while the window is full, so its sends never hit ``ChannelFull``; a window
full for ``WINDOW_STALL_S`` means the gateway is gone and the job ends.

The last frame produced is held until the next one exists (or the segment ends), so that the
frame ending a segment carries ``segment_end`` (timestamps, TS1).

Word timestamps (issue 35): the engine marks each word in native samples from its segment's
start before it yields the chunk the word starts in (or before); the job places the marks on
the pipeline's timeline (native samples pushed since the last clear, which soxr keeps in
time with the output) and hands them to the first frame produced after them, in ms from
that frame's first sample, so they reach the client before or with their audio.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from gateway.contracts import Kind
from gateway.worker.jobs import ReplyLost, Sender
from tts.engine_info import segment_pause_ms
from tts.messages import (
    FlushId,
    TtsAck,
    TtsChunk,
    TtsClear,
    TtsDone,
    TtsEnd,
    TtsFlush,
    TtsFlushed,
    TtsSubmit,
    TtsText,
    sampling_of,
)
from tts.normalize import normalize_text
from tts.worker.engines.base import (
    EngineStats,
    Pcm,
    TtsEngine,
    TtsEngineRequest,
    WordMark,
)
from tts.worker.pipeline import AudioPipeline

logger = logging.getLogger(__name__)

WINDOW_STALL_S = 10.0


@dataclass(frozen=True)
class _FlushMark:
    flush_id: FlushId


@dataclass(frozen=True)
class _EndMark:
    pass


Item = dict[str, Any] | _FlushMark | _EndMark


@dataclass
class _Frame:
    data: bytes
    segment_seq: int
    epoch: int
    segment_start: bool
    words: list[dict[str, Any]]


class TtsJob:
    """One synthesis request running in a worker slot."""

    kind: Kind = "tts"

    def __init__(self, submit: TtsSubmit, engine: TtsEngine, send: Sender) -> None:
        self.submit = submit
        self.job_id = submit.job_id
        self.reply_channel = submit.reply_channel
        self.engine = engine
        self.send = send
        self.window = settings.TTS_CHUNK_WINDOW
        self.next_seq = 0
        self.acked = -1
        self.epoch = 0
        self.samples_sent = 0
        self.stats = EngineStats()  # summed over the job's segments
        self.items: deque[Item] = deque(submit.segments)
        if not submit.incremental:
            self.items.append(_EndMark())
        self.pipeline = AudioPipeline(
            native_rate=engine.native_rate,
            out_rate=submit.sample_rate,
            fmt=submit.format,  # type: ignore[arg-type]  # validated at the edge
            max_frame_ms=settings.TTS_WS_MAX_FRAME_MS,
            pause_ms=segment_pause_ms(engine.name),
        )
        self._more = asyncio.Event()
        self._window_open = asyncio.Event()
        self._window_open.set()
        self._engine_step: asyncio.Task[Pcm | None] | None = None
        self._held: _Frame | None = None
        self._starting = False
        self._segment_seq = 0  # the segment the pipeline's audio belongs to
        self._cleared = False
        # Word marks not on a frame yet (ms since the last clear), and the output samples
        # of the frames made since it.
        self._words: list[dict[str, Any]] = []
        self._frames_out = 0

    # Pinned messages, one method per channel type (the worker consumer's handlers call
    # them): applied now, without blocking.

    def ack(self, ack: TtsAck) -> None:
        """tts.job.ack: the gateway sent chunks up to ``seq``; the window may reopen."""
        self.acked = max(self.acked, ack.seq)
        if self.next_seq - self.acked <= self.window:
            self._window_open.set()

    def text(self, text: TtsText) -> None:
        """tts.job.text: more segments of the current epoch (late ones are dropped)."""
        if text.epoch == self.epoch:
            self.items.extend(text.segments)
        self._more.set()

    def flush(self, flush: TtsFlush) -> None:
        """tts.job.flush: report when the audio of the text so far is sent."""
        self.items.append(_FlushMark(flush.flush_id))
        self._more.set()

    def end(self, end: TtsEnd) -> None:
        """tts.job.end: no more text; finish the job."""
        self.items.append(_EndMark())
        self._more.set()

    def clear(self, clear: TtsClear) -> None:
        """tts.job.clear: drop pending text and audio, start a new epoch."""
        self._clear(clear.epoch)
        self._more.set()

    async def run(self) -> None:
        """Work through the items in order until the end mark, then ``gpu.tts.done``.

        An incremental job waits for more text for as long as its gateway keeps it alive:
        the registry ends a job whose gateway is silent (``gateway.worker.jobs``), and the
        gateway ends a request whose client sends nothing for ``TTS_INPUT_IDLE_S`` (I6).
        """
        started = time.monotonic()
        while True:
            item = await self._next_item()
            if isinstance(item, dict):
                await self._segment(item)
            elif isinstance(item, _FlushMark):
                await self._drain()
                await self.send(TtsFlushed(job_id=self.job_id, flush_id=item.flush_id))
            else:
                await self._drain()
                break
        await self.send(
            TtsDone(
                job_id=self.job_id,
                samples=self.samples_sent,
                chunks=self.next_seq,
                engine_ms=int((time.monotonic() - started) * 1000),
                frames_dropped=self.stats.frames_dropped,
                truncated=self.stats.truncated,
                snac_frames=self.stats.snac_frames,
                tokens=self.stats.tokens,
                tokens_ignored=self.stats.tokens_ignored,
            )
        )

    def _clear(self, epoch: int) -> None:
        """C2: drop queued text and unsent audio; stop the engine within the deadline."""
        self.epoch = epoch
        self.items = deque(i for i in self.items if not isinstance(i, dict))
        self._cleared = True
        if self._engine_step is not None:
            self._engine_step.cancel()
        self._window_open.set()

    async def _next_item(self) -> Item:
        while not self.items:
            self._more.clear()
            await self._more.wait()
        self._apply_clear()
        return self.items.popleft()

    def _apply_clear(self) -> None:
        if self._cleared:
            self._cleared = False
            self.pipeline.reset()
            self._held = None
            self._words, self._frames_out = [], 0

    def _next_is_segment(self) -> bool:
        return bool(self.items) and isinstance(self.items[0], dict)

    async def _segment(self, segment: dict[str, Any]) -> None:
        """Synthesise one segment; a clear stops it at once and drops its audio."""
        epoch, seq = self.epoch, int(segment["seq"])
        self._segment_seq = seq
        self.pipeline.begin_segment()
        self._starting = True
        request = self._engine_request(segment["text"])
        start, marked = self.pipeline.native_in, 0
        # Closed on every exit, so an engine left at a yield stops at once (Z2).
        async with contextlib.aclosing(self.engine.stream(request)) as stream:
            while (pcm := await self._engine_next(stream)) is not None:
                if epoch != self.epoch:
                    break
                self._mark(request.words[marked:], start)
                marked = len(request.words)
                await self._out(self.pipeline.push(pcm), seq, epoch)
        self.stats.add(request.stats)
        if epoch != self.epoch:
            self._apply_clear()
            return
        more = self._next_is_segment()
        frames = self.pipeline.end_segment(pause=more)
        if not more:
            frames += self.pipeline.flush()
        await self._out(frames, seq, epoch)
        await self._release_held(segment_end=True)

    async def _engine_next(self, stream: AsyncIterator[Pcm]) -> Pcm | None:
        """The engine's next chunk, None at its end or when a clear cancelled it."""
        step = asyncio.create_task(_anext_or_none(stream))
        self._engine_step = step
        try:
            await asyncio.wait({step})
        finally:
            self._engine_step = None
            if not step.done():
                step.cancel()  # the job itself is being cancelled: stop the engine too
                await asyncio.wait({step})  # then the stream can be closed
        return None if step.cancelled() else step.result()

    async def _drain(self) -> None:
        """Send the resampler's tail and the held frame (flush, end: AU11)."""
        self._apply_clear()
        await self._out(self.pipeline.flush(), self._segment_seq, self.epoch)
        await self._release_held(segment_end=True)

    def _mark(self, marks: list[WordMark], start: int) -> None:
        """Queue word marks of the segment that began ``start`` native samples into the
        pipeline's timeline, in ms on it."""
        ms = 1000 / self.engine.native_rate
        self._words += [
            {
                "word": m.word,
                "start_ms": (start + m.start) * ms,
                "end_ms": (start + m.end) * ms,
            }
            for m in marks
        ]

    async def _out(self, frames: list[bytes], segment_seq: int, epoch: int) -> None:
        for data in frames:
            if self._held is not None:
                await self._release_held(segment_end=False)
            at = self._frames_out * 1000 / self.submit.sample_rate
            words = [
                w | {"start_ms": w["start_ms"] - at, "end_ms": w["end_ms"] - at}
                for w in self._words
            ]
            self._words = []
            self._frames_out += len(data) // self._sample_bytes
            self._held = _Frame(data, segment_seq, epoch, self._starting, words)
            self._starting = False

    async def _release_held(self, *, segment_end: bool) -> None:
        held, self._held = self._held, None
        if held is None or held.epoch != self.epoch:
            return
        while self.next_seq - self.acked > self.window:
            self._window_open.clear()
            try:
                await asyncio.wait_for(self._window_open.wait(), WINDOW_STALL_S)
            except TimeoutError:
                raise ReplyLost(self.reply_channel) from None
            if held.epoch != self.epoch:
                return
        samples = len(held.data) // self._sample_bytes
        await self.send(
            TtsChunk(
                job_id=self.job_id,
                seq=self.next_seq,
                segment_seq=held.segment_seq,
                data=held.data,
                samples=samples,
                epoch=held.epoch,
                segment_start=held.segment_start,
                segment_end=segment_end,
                words=held.words,
            )
        )
        self.next_seq += 1
        self.samples_sent += samples

    @property
    def _sample_bytes(self) -> int:
        return 1 if self.submit.format == "mulaw" else 2

    def _engine_request(self, text: str) -> TtsEngineRequest:
        job = self.submit
        leading = self.next_seq == 0 and self._held is None
        return TtsEngineRequest(
            text=normalize_text(text) if job.normalize else text,
            voice=job.voice,
            leading=leading,
            word_timestamps=job.word_timestamps,
            **sampling_of(job),
        )


async def _anext_or_none(stream: AsyncIterator[Pcm]) -> Pcm | None:
    """One step of an engine stream; None at its end (a task cannot raise StopAsyncIteration)."""
    try:
        return await anext(stream)
    except StopAsyncIteration:
        return None
