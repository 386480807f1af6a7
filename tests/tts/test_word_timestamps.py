"""Word timestamps (issue 35) on ``/v1/tts/ws``, ``POST /v1/tts`` and ``/v1/audio/speech``,
on the fake engine, whose words are exact: a word lasts its characters' tone (10 ms each).

Each word's ``start_ms`` / ``end_ms`` count from the start of the request's audio whatever
the output rate, across segments, and the ``words`` event arrives before (or with) the
frame its first word starts in. The real Piper run is in ``test_word_timing_piper.py``.
"""

from __future__ import annotations

import base64
import io
import wave
from typing import Any

import pytest

from tests.support.sse import data_events
from tests.tts.conftest import Opener, Transcript
from tests.tts.test_rest import post
from tts.normalize import normalize_text
from tts.worker.engines.piper_words import align, phoneme_spans, sentence_marks
from tts.worker.engines.word_marks import estimate_marks, speakable_words
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "Hello big world. It costs $5, and then (maybe) more!"
MS_PER_CHAR = 10  # the fake engine's


def expected(text: str, *, offset_chars: int = 0) -> list[dict[str, Any]]:
    """The fake engine's exact words of ``text``, ``offset_chars`` of tone before it."""
    return [
        {
            "word": w.text,
            "start_ms": (offset_chars + w.start) * MS_PER_CHAR,
            "end_ms": (offset_chars + w.end) * MS_PER_CHAR,
        }
        for w in speakable_words(text)
    ]


def words_with_audio_before(
    log: Transcript, rate: int
) -> list[tuple[int, dict[str, Any]]]:
    """Each word with the audio (ms) the client had when its ``words`` event came."""
    out, samples = [], 0
    for kind, value in log.items:
        if kind == "bytes":
            samples += len(value) // 2
        elif kind == "text" and value.get("event") == "words":
            out += [(samples * 1000 // rate, w) for w in value["words"]]
    return out


def test_words_are_the_pieces_with_a_letter_or_digit_without_their_punctuation() -> (
    None
):
    assert [w.text for w in speakable_words(TEXT)] == [
        "Hello",
        "big",
        "world",
        "It",
        "costs",
        "5",
        "and",
        "then",
        "maybe",
        "more",
    ]
    assert speakable_words("— … !") == []
    five = speakable_words(TEXT)[5]
    assert TEXT[five.start : five.end] == "5"


def test_the_estimate_is_in_order_and_scales_with_speed() -> None:
    marks = estimate_marks("one three", rate=24000)
    assert [m.word for m in marks] == ["one", "three"]
    assert 0 == marks[0].start < marks[0].end == marks[1].start < marks[1].end
    faster = estimate_marks("one three", rate=24000, speed=2.0)
    assert faster[1].end == pytest.approx(marks[1].end / 2, abs=1)


def test_a_phoneme_belongs_to_the_word_it_lines_up_with_even_when_espeak_joins_them() -> (
    None
):
    # espeak-ng says "of the" as one word, ʌvðə; each word alone: ʌv, ðə.
    sentences = [list("ʌvðə bˈɛst."), list("ɡˌoʊɪŋ")]
    owners = align(["ʌv", "ðə", "bˈɛst", "ɡˈoʊɪŋ"], sentences)
    assert owners[0] == [0, 0, 1, 1, None, 2, None, 2, 2, 2, None]
    assert owners[1] == [3, None, 3, 3, 3, 3]  # the stress mark is no sound
    id_map = {"^": [1], "_": [0], "$": [2]} | {p: [9] for p in "ʌvðə bˈɛst."}
    # ids: ^ _ then each phoneme and its pad: one sample per id here, so 2 a phoneme.
    spans = phoneme_spans(sentences[0], id_map, _ones(2 + 2 * 11 + 1))
    assert spans[0] == (2, 4) and spans[-1] == (22, 24)
    words = speakable_words("of the best going")
    done: set[int] = set()
    marks = sentence_marks(words, owners[0], spans, base=100, done=done)
    assert [(m.word, m.start, m.end) for m in marks] == [
        ("of", 102, 106),
        ("the", 106, 110),
        ("best", 112, 122),
    ]
    assert done == {0, 1, 2}


def _ones(n: int) -> Any:
    import numpy as np

    return np.ones(n, dtype=np.int64)


@pytest.mark.parametrize(("fmt", "rate"), [("pcm", 16000), ("pcm", 48000)])
async def test_ws_words_come_before_their_audio_timed_from_the_requests_start(
    embedded_worker: WorkerRuntime, open_stream: Opener, fmt: str, rate: int
) -> None:
    stream = await open_stream()
    request = {"text": TEXT, "format": fmt, "sample_rate": rate, "normalize": False}
    await stream.send(request | {"word_timestamps": True})
    await stream.event("complete")
    got = words_with_audio_before(stream.log, rate)
    assert [w for _, w in got] == expected(TEXT)
    for audio_ms, word in got:
        assert audio_ms <= word["start_ms"] + 1  # before or with its first frame
    assert all(e["seq"] == 0 for e in stream.log.named("words"))


async def test_ws_words_of_later_segments_count_the_segments_before(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    text = "The first sentence is here. And the second one follows it now."
    stream = await open_stream()
    request = {"text": text, "chunking": True, "format": "pcm", "timestamps": True}
    await stream.send(request | {"word_timestamps": True, "sample_rate": 24000})
    await stream.event("complete")
    starts = {e["seq"]: e for e in stream.log.named("segment_start")}
    assert len(starts) == 2
    first, second = text.split(". ")
    words = [w for e in stream.log.named("words") for w in e["words"]]
    cut = len(speakable_words(first))
    assert words[:cut] == expected(first + ".")
    # The second segment's words count the first segment's audio (the fake engine's
    # pause is 0 ms); segment_start is at a frame's start, a few ms before it.
    offset = len(first + ".")
    assert words[cut:] == expected(second, offset_chars=offset)
    assert 0 <= words[cut]["start_ms"] - starts[1]["start_ms"] <= 15
    kinds = stream.log.kinds()
    assert kinds.index("words") > kinds.index("segment_start")  # within its segment


async def test_ws_without_the_flag_sends_no_words(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": TEXT, "format": "pcm"})
    await stream.event("complete")
    assert stream.log.named("words") == []


async def test_ws_a_non_boolean_flag_is_a_validation_error(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": TEXT, "word_timestamps": "yes"})
    error = await stream.event("error")
    assert error["error"]["code"] == "VALIDATION_ERROR"
    assert "word_timestamps" in error["error"]["message"]


async def test_rest_word_timestamps_answer_json_with_the_audio_and_its_words(
    embedded_worker: WorkerRuntime, api_key: str
) -> None:
    body = {
        "text": TEXT,
        "format": "wav",
        "sample_rate": 16000,
        "word_timestamps": True,
    }
    response = await post(body, api_key)
    assert response.status_code == 200
    assert response["content-type"] == "application/json"
    answer = response.json()
    # The words spoken: the normalised text's ("$5" is "five dollars").
    assert answer["words"] == expected(normalize_text(TEXT))
    assert [w["word"] for w in answer["words"]][5:7] == ["five", "dollars"]
    assert answer["content_type"] == "audio/wav" and answer["sample_rate"] == 16000
    with wave.open(io.BytesIO(base64.b64decode(answer["audio_base64"]))) as w:
        seconds = w.getnframes() / w.getframerate()
    assert seconds == pytest.approx(answer["audio_duration_seconds"], abs=0.01)
    assert seconds * 1000 >= answer["words"][-1]["end_ms"]
    plain = await post({"text": TEXT, "format": "wav"}, api_key)
    assert plain["content-type"] == "audio/wav"


async def test_speech_sse_sends_words_before_their_audio(
    embedded_worker: WorkerRuntime, api_key: str
) -> None:
    body = {
        "model": "tts-1",
        "voice": "alloy",
        "input": TEXT,
        "response_format": "pcm",
        "stream_format": "sse",
        "word_timestamps": True,
    }
    response = await post(body, api_key, path="/v1/audio/speech")
    assert response.status_code == 200
    events = data_events(response.content.decode())
    samples, words = 0, []
    for event in events:
        if event["type"] == "speech.audio.words":
            for word in event["words"]:
                assert samples * 1000 // 24000 <= word["start_ms"] + 1
                words.append(word)
        elif event["type"] == "speech.audio.delta":
            samples += len(base64.b64decode(event["audio"])) // 2
    assert words == expected(normalize_text(TEXT))
    audio = body | {"stream_format": "audio"}
    refused = await post(audio, api_key, path="/v1/audio/speech")
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "word_timestamps"
