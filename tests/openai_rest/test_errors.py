"""OpenAI's error envelope and codes on the audio endpoints, through the unmodified SDK, and
nothing held afterwards: no lease (the ``rest-open`` key has one) and no open usage record."""

from __future__ import annotations

import numpy as np
import openai
import pytest

from tests.openai_rest.conftest import (
    MAX_BYTES,
    MAX_SECONDS,
    RestGateway,
    encode_container,
)

pytestmark = pytest.mark.slow

SHORT = "Hello there, this is a short test."


def envelope(error: openai.APIStatusError) -> dict[str, object]:
    body = error.response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


def tone(seconds: float) -> bytes:
    t = np.arange(int(seconds * 16000)) / 16000
    return encode_container(
        (np.sin(2 * np.pi * 220 * t) * 3000).astype(np.int16), 16000, "wav"
    )


def test_bad_key_is_401_on_every_endpoint(rest_gateway: RestGateway) -> None:
    client = openai.OpenAI(
        base_url=rest_gateway.base_url, api_key="vk_live_wrong", max_retries=0
    )
    calls = [
        lambda: client.audio.speech.create(model="tts-1", voice="alloy", input=SHORT),
        lambda: client.audio.transcriptions.create(
            model="whisper-1", file=("a.wav", tone(1))
        ),
        lambda: client.models.list(),
    ]
    for call in calls:
        with pytest.raises(openai.AuthenticationError) as caught:
            call()
        assert caught.value.status_code == 401
        assert envelope(caught.value)["code"] == "invalid_api_key"


def test_unsupported_formats_are_400(rest_gateway: RestGateway) -> None:
    client = rest_gateway.client()
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.speech.create(
            model="tts-1",
            voice="alloy",
            input=SHORT,
            response_format="ogg",  # type: ignore[arg-type]
        )
    error = envelope(caught.value)
    assert error["param"] == "response_format" and error["type"] == (
        "invalid_request_error"
    )
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.transcriptions.create(
            model="whisper-1",
            file=("a.wav", tone(1)),
            response_format="xml",  # type: ignore[arg-type]
        )
    assert envelope(caught.value)["param"] == "response_format"
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.speech.create(model="dall-e-3", voice="alloy", input=SHORT)
    assert envelope(caught.value)["code"] == "model_not_found"


def test_corrupt_file_is_400(rest_gateway: RestGateway) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        rest_gateway.client().audio.transcriptions.create(
            model="whisper-1", file=("a.mp3", b"this is not audio at all " * 400)
        )
    error = envelope(caught.value)
    assert error["code"] == "invalid_audio_format" and error["param"] == "file"


def test_file_too_long_is_400(rest_gateway: RestGateway) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        rest_gateway.client().audio.transcriptions.create(
            model="whisper-1", file=("long.wav", tone(MAX_SECONDS + 1))
        )
    assert envelope(caught.value)["code"] == "audio_too_long"


def test_file_too_large_is_413(rest_gateway: RestGateway) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        rest_gateway.client().audio.transcriptions.create(
            model="whisper-1", file=("big.wav", bytes(MAX_BYTES + 100_000))
        )
    assert caught.value.status_code == 413
    error = envelope(caught.value)
    assert (error["code"], error["param"]) == ("file_too_large", "file")


def test_over_quota_is_429_insufficient_quota(rest_gateway: RestGateway) -> None:
    client = rest_gateway.client("rest-quota")
    with pytest.raises(openai.RateLimitError) as caught:
        client.audio.speech.create(model="tts-1", voice="alloy", input=SHORT)
    assert envelope(caught.value)["code"] == "insufficient_quota"
    with pytest.raises(openai.RateLimitError) as caught:
        client.audio.transcriptions.create(model="whisper-1", file=("a.wav", tone(3)))
    assert envelope(caught.value)["code"] == "insufficient_quota"


def test_over_rate_limit_is_429_with_retry_after(rest_gateway: RestGateway) -> None:
    client = rest_gateway.client("rest-rpm")
    for _ in range(2):  # each refused after admission: the tokens are spent
        with pytest.raises(openai.BadRequestError):
            client.audio.speech.create(
                model="tts-1", voice="alloy", input=SHORT, speed=9.0
            )
    with pytest.raises(openai.RateLimitError) as caught:
        client.audio.speech.create(model="tts-1", voice="alloy", input=SHORT)
    error = envelope(caught.value)
    assert error["code"] == "rate_limit_exceeded" and error["type"] == "requests"
    assert int(caught.value.response.headers["retry-after"]) >= 1


def test_nothing_held_after_the_errors(rest_gateway: RestGateway) -> None:
    """The one-lease key still gets through both endpoints; no record stays open."""
    client = rest_gateway.client("rest-open")
    before = len(rest_gateway.records())
    for _ in range(2):
        with pytest.raises(openai.BadRequestError):
            client.audio.transcriptions.create(
                model="whisper-1", file=("a.ogg", b"\x00garbage" * 100)
            )
        audio = client.audio.speech.create(
            model="tts-1", voice="alloy", input=SHORT, response_format="wav"
        ).content
        text = client.audio.transcriptions.create(
            model="whisper-1", file=("a.wav", audio)
        ).text
        assert "short test" in text.lower()
    assert rest_gateway.started_records() == 0
    records = rest_gateway.records()
    # Each refusal is a record of its own (issue 30: searchable by request id, billing
    # nothing); each served call one completed record; nothing failed on the server side.
    assert sorted(records[before:]) == sorted(
        [("asr", "failed", "invalid_audio_format")] * 2
        + [("tts", "completed", "")] * 2
        + [("asr", "completed", "")] * 2
    )
    # The module's earlier refusals: one refused by its quota after the file was decoded
    # ends ``failed`` like every other refusal; no server error among them.
    assert ("asr", "failed", "quota_exceeded") in records
    assert not {code for _, status, code in records if status == "failed"} & {
        "internal_error",
        "inference_failed",
        "service_unavailable",
    }
