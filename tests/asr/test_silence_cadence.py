"""A worker job never decodes audio that is all silence since its last decode (issue 13).

With a short idle cadence (``ASR_CHUNK_MIN_S`` 0.3 s) a decode of the silence after speech
would often still run when the commit comes, and the completed event would wait for it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np

from asr.engines.base import AsrDecodeRequest, AsrHypothesis
from asr.jobs import AsrJob
from asr.messages import AsrAudio, AsrCommit, AsrFinal, AsrItemOpen, AsrOpen
from gateway.contracts import Message

RATE = 16_000
PIECE = RATE // 10  # 100 ms appends


class Counting:
    """An engine that answers at once and counts its decodes."""

    decode_slots = 4
    name = "counting"

    def __init__(self) -> None:
        self.decodes = 0

    async def decode(self, req: AsrDecodeRequest) -> AsrHypothesis:
        self.decodes += 1
        await asyncio.sleep(0.01)
        return AsrHypothesis(text=" hello there")


def tone(seconds: float) -> bytes:
    t = np.arange(int(seconds * RATE)) / RATE
    return (8000 * np.sin(2 * np.pi * 440 * t)).astype("<i2").tobytes()


async def stream(job: AsrJob, pcm: bytes, offset: int) -> int:
    for start in range(0, len(pcm), 2 * PIECE):
        piece = pcm[start : start + 2 * PIECE]
        job.audio(AsrAudio(job_id="j", item_seq=0, offset=offset, pcm=piece))
        offset += len(piece) // 2
        await asyncio.sleep(0.03)
    return offset


async def test_silence_after_the_pause_decode_is_never_decoded(settings: Any) -> None:
    settings.ASR_CHUNK_MIN_S = 0.3
    settings.ASR_PAUSE_DECODE_S = 0.2
    engine = Counting()
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    job = AsrJob(
        AsrOpen(job_id="j", reply_channel="r", deadline=0.0, model="m"), engine, send
    )  # type: ignore[arg-type]
    task = asyncio.create_task(job.run())
    try:
        job.item_open(AsrItemOpen(job_id="j", item_seq=0, stream=True))
        offset = await stream(job, bytes(2 * RATE), 0)  # 1 s of silence first
        assert engine.decodes == 0, "leading silence was decoded"
        offset = await stream(job, tone(1.0), offset)
        await asyncio.sleep(0.1)
        during_speech = engine.decodes
        assert during_speech >= 1
        offset = await stream(job, bytes(2 * 2 * RATE), offset)  # 2 s of silence
        assert engine.decodes <= during_speech + 1  # the pause decode at most
        job.commit(AsrCommit(job_id="j", item_seq=0, total_samples=offset))
        deadline = time.monotonic() + 5
        while not any(isinstance(m, AsrFinal) for m in sent):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
