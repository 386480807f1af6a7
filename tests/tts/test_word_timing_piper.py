"""Word timestamps of the real Piper engine against faster-whisper's (issue 35).

The request goes through the whole stack (socket → consumer → channel layer → worker →
Piper), text long enough for several segments; faster-whisper then times the words of the audio
the client received. Over the words both sides agree on, the median difference of the
starts must be at most 80 ms. The numbers are printed (``-s``) for the report.
"""

from __future__ import annotations

import difflib
import itertools
import re
import statistics
from typing import Any

import numpy as np
import pytest
import soxr

from asr.whisper import MODEL_RATE
from asr.worker.engines.base import AsrDecodeRequest
from asr.worker.engines.faster_whisper import FasterWhisperAsr
from tests.tts.conftest import Opener
from tests.tts.test_piper_stack import piper_worker, whisper  # noqa: F401  (fixtures)
from veena_site.runtime import WorkerRuntime

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# About 100 words in six segments (over TTS_SEGMENT_MAX_CHARS): ordinary words, comma
# pauses, a number. Piper's noise makes each reading differ: over fewer words the median
# moved by ±10 ms from run to run.
TEXT = (
    "Every morning the baker opened his shop and sold fresh bread to the children. "
    "One day a traveller arrived with a heavy bag, and asked for a place to stay. "
    "The villagers gave him a warm meal and a bed in the house by the river, "
    "where he slept for 12 hours. "
    "In the evening he told them stories about the mountains and the distant sea. "
    "Please read the meter every morning and write the numbers in the blue notebook. "
    "The quick brown fox jumps over the lazy dog, and a journey of a thousand miles "
    "begins with a single step."
)
RATE = 16_000
MEDIAN_LIMIT_MS = 80


def plain(word: str) -> str:
    return re.sub(r"[^a-z0-9]", "", word.lower())


def matched_starts(
    ours: list[dict[str, Any]], theirs: list[tuple[str, float]]
) -> list[tuple[str, int, float]]:
    """(word, our start_ms, whisper's start ms) of the words both sides have, in order."""
    a, b = [plain(w["word"]) for w in ours], [plain(w) for w, _ in theirs]
    pairs = []
    for block in difflib.SequenceMatcher(
        None, a, b, autojunk=False
    ).get_matching_blocks():
        for k in range(block.size):
            mine, other = ours[block.a + k], theirs[block.b + k]
            pairs.append((mine["word"], mine["start_ms"], other[1]))
    return pairs


async def whisper_words(
    engine: FasterWhisperAsr, pcm: np.ndarray
) -> list[tuple[str, float]]:
    speech = soxr.resample(
        pcm.astype(np.float32) / 32768, RATE, MODEL_RATE, quality="HQ"
    )
    req = AsrDecodeRequest(audio=np.asarray(speech, np.float32), word_timestamps=True)
    hypothesis = await engine.decode(req)
    return [
        (w.text.strip(), w.start * 1000)
        for w in hypothesis.words
        if w.start is not None
    ]


async def test_piper_word_starts_agree_with_faster_whisper_within_80_ms_median(
    piper_worker: WorkerRuntime,  # noqa: F811
    whisper: FasterWhisperAsr,  # noqa: F811
    open_stream: Opener,
) -> None:
    stream = await open_stream()
    request = {"text": TEXT, "format": "pcm", "sample_rate": RATE, "timestamps": True}
    await stream.send(request | {"word_timestamps": True})
    await stream.event("complete", timeout=120)
    assert len(stream.log.named("segment_start")) >= 5
    ours = [w for e in stream.log.named("words") for w in e["words"]]
    pcm = np.frombuffer(stream.log.audio("pcm"), dtype="<i2")
    theirs = await whisper_words(whisper, pcm)
    pairs = matched_starts(ours, theirs)
    diffs = [abs(mine - other) for _, mine, other in pairs]
    median = statistics.median(diffs)
    print(
        f"\nword starts vs faster-whisper: {len(pairs)} of {len(ours)} words matched, "
        f"median |diff| {median:.0f} ms, p90 {np.percentile(diffs, 90):.0f} ms, "
        f"max {max(diffs):.0f} ms; mean signed "
        f"{statistics.mean(m - o for _, m, o in pairs):+.0f} ms"
    )
    assert len(pairs) >= 0.8 * len(ours)
    assert median <= MEDIAN_LIMIT_MS
    # Every word lies inside the audio, in order.
    seconds = len(pcm) / RATE
    assert all(0 <= w["start_ms"] < w["end_ms"] <= seconds * 1000 + 1 for w in ours)
    assert all(a["start_ms"] <= b["start_ms"] for a, b in itertools.pairwise(ours))
