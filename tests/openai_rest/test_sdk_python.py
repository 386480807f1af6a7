"""The unmodified ``openai`` Python SDK against ``/v1/audio/*`` and ``/v1/models`` (issue 15),
on the real engines: Piper speaks, faster-whisper transcribes, WER ≤ 15 %."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from openai_rest.encode import RESPONSE_FORMATS
from tests.openai_rest.conftest import (
    CONTAINERS,
    RestGateway,
    decode_audio,
    encode_container,
)
from tests.support.sse import data_events
from tests.wer import word_error_rate

pytestmark = pytest.mark.slow

TEXT = (
    "The quick brown fox jumps over the lazy dog. This is a test of the speech gateway."
)
# About 37 s of Piper speech: longer than one Whisper window, cut at its pauses.
LONG = " ".join(
    [
        "Once upon a time there was a little village at the edge of a great forest.",
        "Every morning the baker opened his shop and sold fresh bread to the children.",
        "One day a traveller arrived with a heavy bag and asked for a place to stay.",
        "The villagers gave him a warm meal and a bed in the house by the river.",
        "In the evening he told them stories about the mountains and the distant sea.",
        "The children listened until the fire burned low and the stars came out.",
        "When the morning came the traveller thanked everyone and walked away.",
        "Nobody in the village ever forgot the stories he had told that night.",
        "Years later the children still spoke of him whenever the fire was lit.",
        "And some of them left the village one day to see the sea for themselves.",
    ]
)


def assert_wer(reference: str, transcript: str, label: str) -> None:
    wer = word_error_rate(reference, transcript)
    print(f"WER {label}: {wer:.3f} ({transcript!r})")
    assert wer <= 0.15


def transcribe(gw: RestGateway, data: bytes, name: str = "speech.wav") -> str:
    result = gw.client().audio.transcriptions.create(
        model="whisper-1", file=(name, data)
    )
    return result.text


@pytest.fixture(scope="module")
def speech_pcm(rest_gateway: RestGateway) -> np.ndarray:
    """TEXT as 24 kHz PCM, through the SDK."""
    content = (
        rest_gateway.client()
        .audio.speech.create(
            model="tts-1", voice="alloy", input=TEXT, response_format="pcm"
        )
        .content
    )
    return np.frombuffer(content, dtype="<i2").copy()


@pytest.fixture(scope="module")
def long_wav(rest_gateway: RestGateway) -> bytes:
    """LONG as a WAV file (about 37 s)."""
    content = (
        rest_gateway.client()
        .audio.speech.create(
            model="gpt-4o-mini-tts", voice="nova", input=LONG, response_format="wav"
        )
        .content
    )
    pcm, rate = decode_audio(content)
    assert len(pcm) / rate > 30
    return content


@pytest.mark.parametrize("fmt", RESPONSE_FORMATS)
def test_speech_create_each_format_decodes_and_transcribes(
    rest_gateway: RestGateway, fmt: str
) -> None:
    response = rest_gateway.client().audio.speech.create(
        model="tts-1",
        voice="alloy",
        input=TEXT,
        response_format=fmt,  # type: ignore[arg-type]
        instructions="Speak cheerfully.",  # accepted, ignored
    )
    if fmt == "pcm":
        pcm, rate = np.frombuffer(response.content, dtype="<i2"), 24000
    else:
        pcm, rate = decode_audio(response.content)
    assert rate == (48000 if fmt == "opus" else 24000)
    assert 3.0 < len(pcm) / rate < 8.0
    wav = encode_container(pcm.copy(), rate, "wav")
    assert_wer(TEXT, transcribe(rest_gateway, wav), f"speech {fmt}")


def test_speech_with_streaming_response_writes_a_file(
    rest_gateway: RestGateway, tmp_path: Path
) -> None:
    target = tmp_path / "speech.mp3"
    with rest_gateway.client().audio.speech.with_streaming_response.create(
        model="piper", voice="joe", input=TEXT, response_format="mp3", speed=1.0
    ) as response:
        assert response.headers["content-type"] == "audio/mpeg"
        assert response.headers.get("transfer-encoding") == "chunked"
        response.stream_to_file(target)
    assert_wer(TEXT, transcribe(rest_gateway, target.read_bytes(), "a.mp3"), "stream")


def test_speech_sse_deltas_and_done_with_usage(rest_gateway: RestGateway) -> None:
    response = rest_gateway.client().audio.speech.create(
        model="tts-1",
        voice="echo",
        input=TEXT,
        response_format="wav",
        stream_format="sse",
    )
    events = data_events(response.text)
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "speech.audio.done" and set(kinds[:-1]) == {
        "speech.audio.delta"
    }
    assert len(kinds) > 2
    assert events[-1]["usage"]["input_tokens"] == len(TEXT)
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert_wer(TEXT, transcribe(rest_gateway, audio), "sse")


@pytest.mark.parametrize("container", CONTAINERS)
def test_transcriptions_each_container(
    rest_gateway: RestGateway, speech_pcm: np.ndarray, container: str
) -> None:
    data = encode_container(speech_pcm, 24000, container)
    text = transcribe(rest_gateway, data, CONTAINERS[container][2])
    assert_wer(TEXT, text, f"container {container}")


def test_transcription_response_formats(
    rest_gateway: RestGateway, speech_pcm: np.ndarray
) -> None:
    wav = encode_container(speech_pcm, 24000, "wav")
    create = rest_gateway.client().audio.transcriptions.create
    as_json = create(model="whisper-1", file=("a.wav", wav), response_format="json")
    assert_wer(TEXT, as_json.text, "json")
    text = create(model="whisper-1", file=("a.wav", wav), response_format="text")
    assert isinstance(text, str) and text.endswith("\n")
    assert_wer(TEXT, text, "text")
    srt = create(model="whisper-1", file=("a.wav", wav), response_format="srt")
    lines = str(srt).splitlines()
    assert lines[0] == "1" and lines[1].startswith("00:00:00,")
    said = [
        line for line in lines[2:] if line and "-->" not in line and not line.isdigit()
    ]
    assert_wer(TEXT, " ".join(said), "srt")
    vtt = create(model="whisper-1", file=("a.wav", wav), response_format="vtt")
    assert str(vtt).startswith("WEBVTT\n\n00:00:00.000 --> ")
    verbose = create(
        model="gpt-4o-transcribe",
        file=("a.wav", wav),
        response_format="verbose_json",
        language="en",
        prompt="A pangram.",
        temperature=0.0,
        timestamp_granularities=["word", "segment"],
    )
    assert verbose.words is not None
    assert_wer(TEXT, " ".join(w.word for w in verbose.words), "words")
    starts = [w.start for w in verbose.words]
    assert starts == sorted(starts) and verbose.words[-1].end <= verbose.duration + 0.05
    assert verbose.language == "english"
    assert verbose.duration == pytest.approx(len(speech_pcm) / 24000, abs=0.05)
    assert verbose.segments and verbose.segments[0].start < 1.0
    assert_wer(TEXT, " ".join(s.text for s in verbose.segments), "verbose_json")
    check_segments(verbose.segments, verbose.duration)


def check_segments(segments: list[Any], duration: float) -> None:
    """Issue 34: Whisper's own segments, their confidence the decode's (no placeholders)."""
    ends = [0.0]
    for segment in segments:
        assert ends[-1] <= segment.start <= segment.end <= duration + 0.05
        ends.append(segment.end)
        assert segment.tokens and segment.temperature == 0.0
        assert segment.avg_logprob < 0 and 0 < segment.no_speech_prob < 1
        assert segment.compression_ratio > 0


def test_long_file_transcribed_completely(
    rest_gateway: RestGateway, long_wav: bytes
) -> None:
    verbose = rest_gateway.client().audio.transcriptions.create(
        model="whisper-1", file=("long.wav", long_wav), response_format="verbose_json"
    )
    assert verbose.duration > 30
    assert verbose.segments is not None and len(verbose.segments) >= 2
    assert all(s.end - s.start <= 28.0 for s in verbose.segments)
    assert verbose.segments[-1].end > verbose.duration - 3  # the speech to its end
    check_segments(verbose.segments, verbose.duration)
    assert_wer(LONG, verbose.text, "long file")


def test_transcription_stream_deltas_join_to_the_final_text(
    rest_gateway: RestGateway, long_wav: bytes
) -> None:
    stream = rest_gateway.client().audio.transcriptions.create(
        model="whisper-1", file=("long.wav", long_wav), stream=True
    )
    events = list(stream)
    deltas = [e.delta for e in events if e.type == "transcript.text.delta"]
    done = [e for e in events if e.type == "transcript.text.done"]
    assert len(done) == 1 and events[-1] is done[0]
    # Issue 34: a delta a word, not one a piece of the file.
    assert len(deltas) == len(done[0].text.split()) > 10
    assert "".join(deltas) == done[0].text
    assert_wer(LONG, done[0].text, "stream")


def test_models_list_and_retrieve(rest_gateway: RestGateway) -> None:
    client = rest_gateway.client()
    ids = [m.id for m in client.models.list()]
    for name in ("tts-1", "gpt-4o-mini-tts", "piper", "whisper-1", "whisper-tiny.en"):
        assert name in ids
    model = client.models.retrieve("whisper-1")
    assert model.id == "whisper-1" and model.object == "model"
    assert model.owned_by == "veena"
