"""The real faster-whisper engine: a final that reuses the last chunk decode (issue 13).

Each corpus clip is streamed into a worker job one second at a time, waiting for each chunk
decode, then followed by 600 ms of silence (what server VAD commits after a turn), and
committed once the job has acted on all of it (the decode of that pause included). With
``ASR_FINAL_REUSE`` the item completes from that decode; the full final decode the job would
otherwise have run, of the same audio with the same plan, must give the same transcript.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from asr.messages import AsrAudio, AsrCommit, AsrDelta, AsrFinal, AsrItemOpen, AsrOpen
from asr.worker.engines.base import AsrDecodeRequest, AsrHypothesis
from asr.worker.engines.faster_whisper import FasterWhisperAsr
from asr.worker.jobs import AsrJob
from gateway.contracts import Message
from tests.asr.conftest import Clip
from tests.wer import word_error_rate

pytestmark = pytest.mark.slow

SECOND = 16_000
PAUSE = 6 * SECOND // 10


class Counting:
    """The engine, counting finished decodes by kind."""

    def __init__(self, engine: FasterWhisperAsr) -> None:
        self.engine = engine
        self.decode_slots = engine.decode_slots
        self.done = 0  # decodes finished
        self.started = 0

    async def decode(self, req: AsrDecodeRequest) -> AsrHypothesis:
        self.started += 1
        hyp = await self.engine.decode(req)
        self.done += 1
        return hyp


@pytest.fixture(scope="module")
def whisper() -> Iterator[FasterWhisperAsr]:
    engine = FasterWhisperAsr.load(threads=1)
    yield engine
    engine.close()


async def until(condition: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)


async def transcribe(
    engine: Counting,
    pcm: bytes,
    parts: list[tuple[str, str]] | None = None,
    full_finals: list[tuple[str, str]] | None = None,
    transcript: str = "final",
) -> str:
    """Stream ``pcm`` (16 kHz PCM16) as described above; the joined transcript.

    ``parts`` gets the text sent as deltas before the commit and the final's remainder;
    ``full_finals`` the reused hypothesis's text and that of the full final decode of the
    same audio and plan, run once the item completed, when the final was a reused one.
    """
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    job = AsrJob(
        AsrOpen(job_id="j", reply_channel="r", deadline=0.0, model="m"), engine, send
    )  # type: ignore[arg-type]
    reused: list[tuple[AsrHypothesis, Any, Any, int]] = []
    reusable = job.cadence.reusable

    def spy(item: Any, total: int) -> Any:
        found = reusable(item, total)
        if found is not None:  # the plan a full final decode would have run, now
            plan = item.state.final_plan(total, words=False)
            reused.append((found[0], item, plan, total))
        return found

    job.cadence.reusable = spy  # type: ignore[method-assign]
    task = asyncio.create_task(job.run())
    opened = AsrItemOpen(job_id="j", item_seq=0, stream=True, transcript=transcript)
    job.item_open(opened)
    for offset in range(0, len(pcm) // 2, SECOND):
        piece = pcm[2 * offset : 2 * (offset + SECOND)]
        before = engine.done
        job.audio(AsrAudio(job_id="j", item_seq=0, offset=offset, pcm=piece))
        if len(piece) == 2 * SECOND:
            await until(lambda before=before: engine.done > before)
    job.audio(
        AsrAudio(job_id="j", item_seq=0, offset=len(pcm) // 2, pcm=bytes(2 * PAUSE))
    )

    def settled() -> bool:
        """The job acted on all the audio: no decode runs or is due, and the last one
        covered all the speech. (Checked only once the job had its turn: right after the
        pause arrives, the previous decode may already cover the speech while the job has
        yet to start the pause's full-context decode.)"""
        item = job.items[0]
        return (
            not item.wake.is_set()
            and item.chunk is None
            and engine.started == engine.done
            and item.decoded_at >= item.speech_end
        )

    await until(settled)
    total = len(pcm) // 2 + PAUSE
    before_commit = "".join(m.text for m in sent if isinstance(m, AsrDelta))
    job.commit(AsrCommit(job_id="j", item_seq=0, total_samples=total))
    await until(lambda: any(isinstance(m, AsrFinal) for m in sent))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    deltas = "".join(m.text for m in sent if isinstance(m, AsrDelta))
    final = next(m for m in sent if isinstance(m, AsrFinal))
    if parts is not None:
        parts.append((before_commit, final.text))
    if full_finals is not None and reused:
        hyp, item, plan, total = reused[0]
        full = await job._decode(item, plan, total)
        full_finals.append((hyp.text, full.text))
    return deltas + final.text if final.transcript is None else final.transcript


async def test_reused_finals_equal_full_final_decodes_on_the_corpus(
    whisper: FasterWhisperAsr, clips: dict[str, Clip]
) -> None:
    """Issue 13: every clip's final is reused, and equals the full final decode of the same
    audio with the same plan."""
    full_finals: list[tuple[str, str]] = []
    texts = []
    for clip in clips.values():
        engine = Counting(whisper)
        pcm = clip.pcm16k.astype("<i2").tobytes()
        texts.append(await transcribe(engine, pcm, full_finals=full_finals))

    assert len(full_finals) == len(clips)  # no clip needed a final decode
    for reused, full in full_finals:
        assert reused.split() == full.split()
    for clip, text in zip(clips.values(), texts, strict=True):
        assert word_error_rate(clip.text, text) <= 0.2, (clip.text, text)


@pytest.mark.parametrize("confirm", [True, False])
async def test_the_pause_decode_shows_every_word_before_the_commit(
    settings: Any, whisper: FasterWhisperAsr, clips: dict[str, Clip], confirm: bool
) -> None:
    """Issue 13 (ASR_PAUSE_CONFIRM): the decode of the pause confirms all its words. It
    continues the shown words with the "deltas" option; with "final" it is the whole
    decode, which confirms them only where it agrees with the preview (issue 34)."""
    settings.ASR_PAUSE_CONFIRM = confirm
    parts: list[tuple[str, str]] = []
    for clip in clips.values():
        pcm = clip.pcm16k.astype("<i2").tobytes()
        await transcribe(Counting(whisper), pcm, parts, transcript="deltas")
    shown = sum(len(before.split()) for before, _ in parts)
    words = sum(len((before + rest).split()) for before, rest in parts)
    if confirm:
        assert shown == words, parts
    else:
        assert shown < words, parts
