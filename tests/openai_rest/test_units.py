"""Plain tests of the OpenAI REST pieces: request fields, cutting, transcripts, encoders."""

from __future__ import annotations

import io
import json
from typing import Any

import av
import numpy as np
import pytest
import soundfile as sf

from accounts.exceptions import AdmissionDenied, MissingApiKey
from asr.messages import AsrFinal
from asr.whisper import DecodedSegment as Segment
from openai_rest.encode import RESPONSE_FORMATS, StreamEncoder
from openai_rest.errors import OpenAiError, denial_error
from openai_rest.speech_request import parse_speech, tts_request
from openai_rest.split import MAX_PIECE_S, Piece, split_pieces
from openai_rest.transcripts import (
    PieceTranscript,
    piece_transcript,
    render,
    srt,
    vtt,
    word_deltas,
)

RATE = 16000


def noise(seconds: float) -> np.ndarray:
    return (
        np.random.default_rng(0).normal(0, 3000, int(seconds * RATE)).astype(np.int16)
    )


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), dtype=np.int16)


def test_pieces_end_at_pauses_and_skip_silence() -> None:
    pcm = np.concatenate(
        [
            silence(2),
            noise(3),
            silence(0.3),
            noise(3),
            silence(0.8),
            noise(4),
            silence(3),
        ]
    )
    pieces = split_pieces(pcm)
    # The short pause (0.3 s) does not cut; the 0.8 s one does; trailing silence goes.
    assert len(pieces) == 2
    assert pieces[0].start == 0 and 8.3 < pieces[0].end_s < 9.1
    assert pieces[1].end_s < len(pcm) / RATE


def test_pieces_of_continuous_speech_are_at_most_the_window() -> None:
    pcm = noise(70)
    pieces = split_pieces(pcm)
    assert len(pieces) >= 3
    assert all(p.end_s - p.start_s <= MAX_PIECE_S for p in pieces)
    assert pieces[0].start == 0 and pieces[-1].end == len(pcm)
    assert all(a.end == b.start for a, b in zip(pieces, pieces[1:], strict=False))
    assert split_pieces(silence(5)) == [] and split_pieces(silence(0)) == []


def test_transcript_formats() -> None:
    segments = [Segment(0.0, 2.5, "Hello there."), Segment(2.5, 3661.25, "Bye.")]
    pieces = [
        PieceTranscript("Hello there.", segments[:1]),
        PieceTranscript("Bye.", segments[1:]),
    ]
    assert srt(segments) == (
        "1\n00:00:00,000 --> 00:00:02,500\nHello there.\n\n"
        "2\n00:00:02,500 --> 01:01:01,250\nBye.\n\n"
    )
    assert vtt(segments).startswith("WEBVTT\n\n00:00:00.000 --> 00:00:02.500\nHello")
    body, kind = render("json", pieces, duration_s=3.2, language="en")
    assert body == {
        "text": "Hello there. Bye.",
        "usage": {"type": "duration", "seconds": 4},
    }
    assert kind == "application/json"
    verbose, _ = render("verbose_json", pieces, duration_s=3.2, language="en")
    assert isinstance(verbose, dict) and verbose["language"] == "english"
    assert [s["id"] for s in verbose["segments"]] == [0, 1]
    text, kind = render("text", pieces, duration_s=3.2, language="en")
    assert text == "Hello there. Bye.\n" and kind.startswith("text/plain")
    assert word_deltas(0, " Hi there.") == ["Hi", " there."]
    assert word_deltas(1, "Yes.") == [" Yes."] and word_deltas(2, "  ") == []


def test_verbose_language_is_the_first_decoded_then_the_requested() -> None:
    def verbose_language(languages: list[str | None], requested: str | None) -> Any:
        pieces = [PieceTranscript("Hi.", language=code) for code in languages]
        body, _ = render("verbose_json", pieces, duration_s=1.0, language=requested)
        assert isinstance(body, dict)
        return body["language"]

    assert verbose_language(["de", "en"], None) == "german"
    assert verbose_language([None, "ja"], "en") == "japanese"
    assert verbose_language(["ht"], None) == "haitian creole"
    assert verbose_language(["yue"], None) == "yue"  # not ISO-639-1: its code
    assert verbose_language([None, None], "en") == "english"
    assert verbose_language([None], None) == "unknown"
    assert verbose_language([], None) == "unknown"  # a silent file: no pieces


def test_a_final_without_language_reads_as_none() -> None:
    """A worker from before the field sends no ``language``; one that has it sends it."""
    sent = AsrFinal(job_id="j", item_seq=0, text="Hi.", language="de").to_message()
    assert AsrFinal.from_message(sent).language == "de"
    old = {k: v for k, v in sent.items() if k != "language"}
    assert AsrFinal.from_message(old).language is None


def test_verbose_segments_are_the_decodes_moved_to_file_times() -> None:
    """Issue 34: Whisper's segments with the decode's own confidence, no placeholders;
    times move from the piece to the file and stay inside the piece."""
    decoded = [
        {
            "start": 0.0,
            "end": 2.4,
            "text": " Hello there.",
            "tokens": [50363, 2425, 612, 13, 50483],
            "avg_logprob": -0.21,
            "no_speech_prob": 0.013,
            "compression_ratio": 0.9,
            "temperature": 0.0,
        },
        {
            "start": 2.4,
            "end": 6.0,  # past the piece's 5.5 s
            "text": " Bye.",
            "tokens": [50483, 47043, 13, 50663],
            "avg_logprob": -0.5,
            "no_speech_prob": 0.02,
            "compression_ratio": 0.7,
            "temperature": 0.0,
        },
    ]
    words = [{"word": "Hello", "start": 0.0, "end": 0.5}]
    piece = piece_transcript(
        Piece(16000, 16000 * 6), " Hello there. Bye.", decoded, words
    )
    assert piece.text == "Hello there. Bye."
    assert [(s.start, s.end) for s in piece.segments] == [(1.0, 3.4), (3.4, 6.0)]
    assert piece.words == ({"word": "Hello", "start": 1.0, "end": 1.5},)
    verbose, _ = render(
        "verbose_json", [piece], duration_s=6.0, language="en", words=True
    )
    assert isinstance(verbose, dict)
    first = verbose["segments"][0]
    assert first == {
        "id": 0,
        "seek": 100,
        "start": 1.0,
        "end": 3.4,
        "text": " Hello there.",
        "tokens": [50363, 2425, 612, 13, 50483],
        "temperature": 0.0,
        "avg_logprob": -0.21,
        "compression_ratio": 0.9,
        "no_speech_prob": 0.013,
    }
    assert verbose["words"] == [{"word": "Hello", "start": 1.0, "end": 1.5}]
    from openai.types.audio import TranscriptionVerbose

    TranscriptionVerbose.model_validate(verbose)


def encoded(fmt: str, whole: bool) -> tuple[bytes, list[bytes], bytes]:
    """One second of a tone through the encoder in 200 ms chunks: PCM, parts, file."""
    t = np.arange(24000) / 24000
    pcm = (np.sin(2 * np.pi * 440 * t) * 8000).astype("<i2").tobytes()
    encoder = StreamEncoder(fmt, 24000, whole=whole)  # type: ignore[arg-type]
    parts = [encoder.encode(pcm[i : i + 4800]) for i in range(0, len(pcm), 4800)]
    parts.append(encoder.flush())
    return pcm, parts, b"".join(parts)


@pytest.mark.parametrize("fmt", RESPONSE_FORMATS)
def test_each_encoder_streams_audio_that_decodes(fmt: str) -> None:
    pcm, parts, data = encoded(fmt, whole=False)
    assert sum(1 for p in parts[:-1] if p) >= 3  # bytes leave as the audio arrives
    if fmt == "pcm":
        assert data == pcm
        return
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        samples = sum(f.samples for f in container.decode(stream))
        rate = stream.codec_context.sample_rate
    assert samples / rate == pytest.approx(1.0, abs=0.1)


@pytest.mark.parametrize("fmt", ["mp3", "opus", "flac", "wav"])
def test_a_whole_file_leaves_at_once_with_its_true_length(fmt: str) -> None:
    _, parts, data = encoded(fmt, whole=True)
    assert not any(parts[:-1]) and parts[-1]
    with sf.SoundFile(io.BytesIO(data)) as f:  # libsndfile takes the header's word
        assert f.frames == 24000 and len(f.read()) == 24000


def test_a_stream_states_no_length_it_does_not_know() -> None:
    assert encoded("wav", whole=False)[2][4:8] == b"\xff\xff\xff\xff"
    assert b"Xing" not in encoded("mp3", whole=False)[2]
    assert b"Info" not in encoded("mp3", whole=False)[2]
    assert StreamEncoder("flac", 24000).whole  # FLAC is never streamed without it


def body(**fields: object) -> bytes:
    return json.dumps(
        {"model": "tts-1", "input": "Hi.", "voice": "alloy", **fields}
    ).encode()


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"model": "dall-e"}, "model"),
        ({"input": None}, "input"),
        ({"input": 7}, "input"),
        ({"voice": ""}, "voice"),
        ({"response_format": "ogg"}, "response_format"),
        ({"speed": 5}, "speed"),
        ({"speed": "fast"}, "speed"),
        ({"stream_format": "chunks"}, "stream_format"),
    ],
)
def test_speech_fields_are_validated(fields: dict[str, object], param: str) -> None:
    with pytest.raises(OpenAiError) as caught:
        parse_speech(body(**fields))
    assert caught.value.status == 400 and caught.value.param == param


def test_speech_defaults_and_the_socket_request() -> None:
    req = parse_speech(body(instructions="whisper", voice={"id": "nova"}))
    assert (req.response_format, req.stream_format, req.speed) == ("mp3", "audio", 1.0)
    tts = tts_request(parse_speech(body(speed=4.0)))
    assert (tts.format, tts.sample_rate, tts.speed, tts.speaker) == (
        "pcm",
        24000,
        2.0,
        "male1",
    )
    assert tts_request(parse_speech(body(voice="joe"))).speaker == "joe"
    with pytest.raises(OpenAiError):
        parse_speech(b"{not json")


def test_denials_in_openai_shape() -> None:
    missing = denial_error(MissingApiKey())
    assert (missing.status, missing.code) == (401, "invalid_api_key")
    limited = denial_error(AdmissionDenied("rate_limited", retry_after_ms=1500))
    assert (limited.status, limited.type, limited.retry_after_ms) == (
        429,
        "requests",
        1500,
    )
    quota = denial_error(AdmissionDenied("quota_exceeded"))
    assert (quota.status, quota.code, quota.retry_after_ms) == (
        429,
        "insufficient_quota",
        None,
    )
    assert set(quota.body()["error"]) == {"message", "type", "param", "code"}


@pytest.mark.django_db
def test_an_unknown_v1_url_is_openai_s_404_and_other_paths_keep_django_s() -> None:
    from django.test import Client

    client = Client()
    response = client.post("/v1/audio/speeches", {})
    assert response.status_code == 404
    assert response.json()["error"] == {
        "message": "Invalid URL (POST /v1/audio/speeches).",
        "type": "invalid_request_error",
        "param": None,
        "code": "unknown_url",
    }
    other = client.get("/dashboard/nowhere")
    assert other.status_code == 404 and "json" not in other["Content-Type"]
