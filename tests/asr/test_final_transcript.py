"""Issue 34 on the real faster-whisper engine: ``completed`` is as accurate as the engine
decoding each whole item, with logprobs and word times.

Four sessions at once stream Piper speech paced in real time (100 ms appends, 0.6 s of
silence, commit) through the ASGI application and the embedded worker. The pooled WER of
their ``completed`` transcripts must stay within 1.1× (plus two words of margin: the stack
decodes the resampled 24 kHz stream, the reference the 16 kHz clip) of the same engine
decoding each whole clip with the product's final decode
(``asr.worker.engines.base.final_request``). Every frame is validated with the openai SDK's models
(``tests.asr.conftest.Realtime``), with ``include`` logprobs and word times asked for.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from asr.worker.engines.base import final_request
from tests.asr.conftest import Clip, Realtime, connect, silence, synthesize, update
from tests.wer import normalized_words, word_error_rate

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CORPUS = (
    "The lighthouse keeper rose before the sun, as he had done every morning "
    "for many years.",
    "In the spring, a storm arrived without warning. The clouds turned dark green "
    "and the waves grew tall.",
    "She opened the window and listened to the rain falling on the quiet street.",
    "He forgot his umbrella at the office and walked home through the storm.",
    "The children built a sand castle near the water and watched the tide come in.",
    "My neighbor grows tomatoes, peppers and beans in the garden behind her house.",
    "The pilot announced that we would land a little ahead of schedule.",
    "Please send the report to the manager before the meeting starts tomorrow.",
)
SESSIONS = 4
APPEND = 2400 * 2  # 100 ms at 24 kHz
TAIL_S = 0.6
LOGPROBS = "item.input_audio_transcription.logprobs"
COMPLETED = "conversation.item.input_audio_transcription.completed"
DELTA = "conversation.item.input_audio_transcription.delta"


@pytest.fixture(scope="module")
def corpus() -> list[Clip]:
    return synthesize(list(CORPUS))


@pytest.fixture
def whisper_worker(settings: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    settings.ASR_ENGINE = "faster_whisper"
    settings.TTS_ENGINE = "fake"
    yield request.getfixturevalue("embedded_worker")


async def stream(
    rt: Realtime,
    clip: Clip,
    transcription: dict[str, Any] | None = None,
    include: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Configure, stream ``clip`` at 24 kHz in real time, commit; the events to item.done."""
    settings = {"language": "en", **(transcription or {})}
    event = update(turn_detection=None, transcription=settings)
    event["session"]["include"] = include
    await rt.send(event)
    await rt.until("session.updated")
    pcm = clip.bytes_at(24000) + silence(TAIL_S)
    started = time.monotonic()
    for n, at in enumerate(range(0, len(pcm), APPEND), start=1):
        await rt.append(pcm[at : at + APPEND], chunk_bytes=APPEND)
        await asyncio.sleep(max(0.0, started + n * 0.1 - time.monotonic()))
    await rt.send({"type": "input_audio_buffer.commit"})
    await rt.until("conversation.item.done", timeout=60)
    return rt.frames


async def test_completed_is_within_the_wer_of_a_whole_item_decode(
    whisper_worker: Any, api_key: str, corpus: list[Clip]
) -> None:
    completed: list[str] = []
    previews: list[str] = []
    for first in range(0, len(corpus), SESSIONS):
        clips = corpus[first : first + SESSIONS]
        sockets = [await connect(key=api_key) for _ in clips]
        runs = await asyncio.gather(
            *(stream(rt, clip) for rt, clip in zip(sockets, clips, strict=True))
        )
        for rt, frames in zip(sockets, runs, strict=True):
            await rt.comm.disconnect()
            done = next(e for e in frames if e["type"] == COMPLETED)
            completed.append(done["transcript"])
            previews.append("".join(e["delta"] for e in frames if e["type"] == DELTA))
    engine = whisper_worker.engines["asr"].engine
    whole = []
    for clip in corpus:
        audio = clip.pcm16k.astype(np.float32) / 32768.0
        tail = np.zeros(int(TAIL_S * 16000), dtype=np.float32)
        hyp = await engine.decode(final_request(np.concatenate([audio, tail])))
        whole.append(hyp.text)
    words = sum(len(normalized_words(c.text)) for c in corpus)

    def errors(texts: list[str]) -> float:
        return sum(
            word_error_rate(c.text, t) * len(normalized_words(c.text))
            for c, t in zip(corpus, texts, strict=True)
        )

    print(
        f"WER completed {errors(completed) / words:.3f}, deltas joined "
        f"{errors(previews) / words:.3f}, whole-item decode {errors(whole) / words:.3f}"
    )
    assert errors(completed) <= 1.1 * errors(whole) + 2
    assert sum(bool(p) for p in previews) >= len(corpus) - 1  # the preview streamed


async def test_logprobs_and_word_times_of_an_item(
    whisper_worker: Any, api_key: str, corpus: list[Clip]
) -> None:
    words = {"timestamp_granularities": ["word"]}
    rt = await connect(key=api_key)
    frames = await stream(rt, corpus[0], words)
    await rt.comm.disconnect()
    deltas = [e for e in frames if e["type"] == DELTA]
    done = next(e for e in frames if e["type"] == COMPLETED)
    assert deltas and "logprobs" not in done  # not asked for: none
    assert all("logprobs" not in e for e in deltas)
    check_words(done["words"], done["transcript"], done["usage"]["seconds"])

    rt = await connect(key=api_key)
    frames = await stream(rt, corpus[1], words, include=[LOGPROBS])
    await rt.comm.disconnect()
    deltas = [e for e in frames if e["type"] == DELTA]
    done = next(e for e in frames if e["type"] == COMPLETED)
    assert deltas
    for event in [*deltas, done]:
        text = event.get("delta", event.get("transcript"))
        entries = event["logprobs"]
        assert entries and "".join(e["token"] for e in entries) == text
        for entry in entries:
            assert math.isfinite(entry["logprob"]) and entry["logprob"] <= 0
            assert entry["bytes"] == list(entry["token"].encode("utf-8"))
    assert word_error_rate(CORPUS[1], done["transcript"]) <= 0.15
    check_words(done["words"], done["transcript"], done["usage"]["seconds"])


def check_words(words: list[dict[str, Any]], transcript: str, seconds: float) -> None:
    """Word times rise, lie inside the item's audio, and spell the transcript."""
    assert words
    starts = [w["start"] for w in words]
    assert starts == sorted(starts)
    assert all(0 <= w["start"] <= w["end"] <= seconds for w in words)
    spelled = " ".join(w["word"] for w in words)
    assert normalized_words(spelled) == normalized_words(transcript)
