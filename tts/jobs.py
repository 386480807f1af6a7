"""The worker side of a TTS job: engine → fades → resampler → frames → ``gpu.tts.chunk``.

The worker owns the audio pipeline (tts Q8): joins, resampling, encoding and framing. It keeps at
most ``TTS_CHUNK_WINDOW`` chunks beyond the gateway's last ack, pausing the engine while the window
is full, so its sends never hit ``ChannelFull``; a window full for ``WINDOW_STALL_S`` means the
gateway is gone and the job ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from django.conf import settings

from tts.audio import FrameEncoder, fade_edges
from tts.engines.base import Pcm, TtsEngine, TtsEngineRequest
from tts.messages import TtsAck, TtsChunk, TtsDone, TtsSubmit
from veena_site.contracts import Kind
from veena_site.jobs import ReplyLost, Sender

logger = logging.getLogger(__name__)

WINDOW_STALL_S = 10.0


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
        self._window_open = asyncio.Event()
        self._window_open.set()

    def receive(self, message: dict[str, Any]) -> None:
        """Take an ack: the gateway handed chunks up to ``seq`` to the socket."""
        if message["type"] == TtsAck.TYPE:
            self.acked = max(self.acked, TtsAck.from_message(message).seq)
            if self.next_seq - self.acked <= self.window:
                self._window_open.set()

    async def run(self) -> None:
        """Synthesize every segment in order and send its frames, then ``gpu.tts.done``."""
        job = self.submit
        started = time.monotonic()
        encoder = FrameEncoder(
            self.engine.native_rate,
            job.sample_rate,
            job.format,
            settings.TTS_WS_MAX_FRAME_MS,
        )
        for segment in job.segments:
            seq = int(segment["seq"])
            async for pcm in self._segment_audio(segment["text"]):
                for frame in encoder.push(pcm):
                    await self._emit(frame, seq)
        last_seq = int(job.segments[-1]["seq"]) if job.segments else 0
        for frame in encoder.finish():
            await self._emit(frame, last_seq)
        await self.send(
            TtsDone(
                job_id=self.job_id,
                samples=encoder.samples_out,
                chunks=self.next_seq,
                engine_ms=int((time.monotonic() - started) * 1000),
            )
        )

    async def _segment_audio(self, text: str) -> Any:
        """Yield the segment's engine audio with 5 ms fades at both of its ends (tts AU9)."""
        req = TtsEngineRequest(
            text=text,
            voice=self.submit.voice,
            speed=self.submit.speed,
            seed=self.submit.seed,
            temperature=self.submit.temperature,
            top_k=self.submit.top_k,
            top_p=self.submit.top_p,
            max_tokens=self.submit.max_tokens,
            repetition_penalty=self.submit.repetition_penalty,
        )
        rate = self.engine.native_rate
        held: Pcm | None = None
        first = True
        async for pcm in self.engine.stream(req):
            if len(pcm) == 0:
                continue
            if held is not None:
                yield fade_edges(held, rate, fade_in=first, fade_out=False)
                first = False
            held = pcm
        if held is not None:
            yield fade_edges(held, rate, fade_in=first, fade_out=True)

    async def _emit(self, data: bytes, segment_seq: int) -> None:
        while self.next_seq - self.acked > self.window:
            self._window_open.clear()
            try:
                await asyncio.wait_for(self._window_open.wait(), WINDOW_STALL_S)
            except TimeoutError:
                raise ReplyLost(self.reply_channel) from None
        bytes_per_sample = 1 if self.submit.format == "mulaw" else 2
        await self.send(
            TtsChunk(
                job_id=self.job_id,
                seq=self.next_seq,
                segment_seq=segment_seq,
                data=data,
                samples=len(data) // bytes_per_sample,
            )
        )
        self.next_seq += 1
