"""Wire schema (docs/specs/tts-ws.md §2, §6, §13 H1): plain sync tests of ``tts.protocol``."""

from __future__ import annotations

import json

import pytest

from tts.events import Error, rate_limit_message, server_message
from tts.protocol import (
    CLOSE_CODES,
    HTTP_STATUS,
    NON_FATAL_CODES,
    Cancel,
    Clear,
    End,
    Flush,
    Ping,
    TextInput,
    TtsProtocolError,
    TtsRequest,
    parse_client_event,
    parse_rest_body,
)


def parse(message: object) -> object:
    return parse_client_event(json.dumps(message))


def error_of(message: object) -> TtsProtocolError:
    with pytest.raises(TtsProtocolError) as info:
        parse(message)
    return info.value


def test_tts_g1_r1_defaults_are_the_reference_defaults() -> None:
    req = parse({"text": "Hello"})
    assert req == TtsRequest(
        text="Hello",
        speaker="male1",
        temperature=0.8,
        top_k=50,
        top_p=1.0,
        max_tokens=4096,
        repetition_penalty=1.05,
        seed=None,
        chunking=False,
        normalize=True,
        format="wav",
        sample_rate=16000,
    )
    assert parse({"event": "request", "text": "Hello"}) == req


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"text": ""}, "Text is required and cannot be empty"),
        ({"text": "   \n"}, "Text is required and cannot be empty"),
        ({}, "Text is required and cannot be empty"),
        ({"text": 5}, "Text is required and cannot be empty"),
        ({"text": "x" * 50_001}, "Text too long: 50001 chars (max 50000)"),
        (
            {"text": "a", "top_k": 1001},
            "Field 'top_k' must be an integer between 1 and 1000, or 0 or -1",
        ),
        ({"text": "a", "temperature": 2.5}, "Field 'temperature' must be a number between 0 and 2"),
        ({"text": "a", "top_p": 0}, "Field 'top_p' must be a number greater than 0 and at most 1"),
        ({"text": "a", "max_tokens": 0}, "Field 'max_tokens' must be an integer between 1 and 8192"),
        ({"text": "a", "max_tokens": 10.5}, "Field 'max_tokens' must be an integer between 1 and 8192"),
        ({"text": "a", "repetition_penalty": 0.9}, "Field 'repetition_penalty' must be a number between 1 and 2"),
        ({"text": "a", "seed": -1}, "Field 'seed' must be an integer between 0 and 4294967295"),
        ({"text": "a", "seed": 4_294_967_296}, "Field 'seed' must be an integer between 0 and 4294967295"),
        ({"text": "a", "chunking": "yes"}, "Field 'chunking' must be a boolean"),
        ({"text": "a", "normalize": 1}, "Field 'normalize' must be a boolean"),
        ({"text": "a", "speed": 3}, "Field 'speed' must be a number between 0.5 and 2"),
        ({"text": "a", "keep_alive": "true"}, "Field 'keep_alive' must be a boolean"),
        ({"text": "a", "timestamps": 0}, "Field 'timestamps' must be a boolean"),
        ({"text": "a", "request_id": "bad id"}, "Field 'request_id' must be at most 64 characters of [A-Za-z0-9._:-]"),
        ({"text": "a", "request_id": "x" * 65}, "Field 'request_id' must be at most 64 characters of [A-Za-z0-9._:-]"),
        ({"text": "a", "speaker": 7}, "Field 'speaker' must be a string"),
    ],
)  # fmt: skip
def test_tts_r1_validation_messages(fields: dict, message: str) -> None:
    error = error_of(fields)
    assert (error.code, error.message, error.close_code) == (
        "VALIDATION_ERROR",
        message,
        1003,
    )


def test_tts_r1_fields_are_validated_in_table_order_speaker_last() -> None:
    bad = {"text": "a", "speaker": 1, "speed": 9, "top_k": 5000, "temperature": 9}
    assert "temperature" in error_of(bad).message
    del bad["temperature"]
    assert "top_k" in error_of(bad).message
    del bad["top_k"]
    assert "speed" in error_of(bad).message
    del bad["speed"]
    assert "speaker" in error_of(bad).message


@pytest.mark.parametrize("top_k", [-1, 0, 1, 1000])
def test_tts_r1_top_k_accepts_off_values_and_the_range(top_k: int) -> None:
    assert parse({"text": "a", "top_k": top_k}).top_k == top_k


def test_tts_r2_null_means_default_and_seed_null_is_random() -> None:
    nulls = {name: None for name in ("speaker", "temperature", "top_k", "top_p")}
    nulls |= {"max_tokens": None, "seed": None, "format": None, "sample_rate": None}
    req = parse({"text": "a", **nulls})
    assert req == TtsRequest(text="a")
    assert req.seed is None


def test_tts_r2_integral_floats_are_integers() -> None:
    req = parse(
        {"text": "a", "max_tokens": 4096.0, "top_k": 7.0, "sample_rate": 24000.0}
    )
    assert (req.max_tokens, req.top_k, req.sample_rate) == (4096, 7, 24000)
    assert isinstance(req.max_tokens, int)


def test_tts_r2_booleans_must_be_json_booleans() -> None:
    for value in (0, 1, "false", "true"):
        assert error_of({"text": "a", "chunking": value}).code == "VALIDATION_ERROR"
    assert error_of({"text": "a", "top_k": True}).code == "VALIDATION_ERROR"


def test_tts_r2_unknown_fields_are_ignored() -> None:
    assert parse({"text": "a", "voice_style": "x", "volume": 3}) == TtsRequest(text="a")


def test_tts_r3_non_object_json_is_validation_error() -> None:
    for message in ([1, 2], "text", 5, None):
        error = error_of(message)
        assert error.message == "Request must be a JSON object"
        assert (error.code, error.close_code) == ("VALIDATION_ERROR", 1003)


def test_tts_r3_non_json_and_binary_are_invalid_json() -> None:
    with pytest.raises(TtsProtocolError) as info:
        parse_client_event("{not json")
    assert info.value.code == "INVALID_JSON" and info.value.close_code == 1003
    assert info.value.message.startswith("Invalid JSON: ")
    with pytest.raises(TtsProtocolError) as info:
        parse_client_event(None, b"\x00\x01")
    assert info.value.code == "INVALID_JSON"


def test_tts_r4_format_and_rate_rules() -> None:
    error = error_of({"text": "a", "format": "mp3"})
    assert error.message == "Unsupported format 'mp3' (supported: wav, pcm, mulaw)"
    assert parse({"text": "a", "format": "mulaw"}).sample_rate == 8000
    assert (
        parse({"text": "a", "format": "pcm", "sample_rate": 48000}).sample_rate == 48000
    )
    for fields in ({"sample_rate": 11025}, {"format": "mulaw", "sample_rate": 16000}):
        assert error_of({"text": "a", **fields}).code == "VALIDATION_ERROR"
    for rate in (8000, 16000, 22050, 24000, 44100, 48000):
        assert parse({"text": "a", "sample_rate": rate}).sample_rate == rate


def test_tts_r1_sampling_fields_validated_even_if_unused() -> None:
    """R5: piper ignores sampling fields, but they are still validated."""
    assert error_of({"text": "a", "repetition_penalty": 5}).code == "VALIDATION_ERROR"


def test_tts_r8_control_messages() -> None:
    assert parse({"event": "ping", "x": 1}) == Ping()
    assert parse({"event": "cancel"}) == Cancel()
    assert parse({"event": "cancel", "request_id": "r1"}) == Cancel("r1")
    assert parse({"event": "clear"}) == Clear()
    error = error_of({"event": "dance"})
    assert error.event == "dance" and error.code == "VALIDATION_ERROR"


def test_tts_i1_start_carries_every_field_but_text() -> None:
    start = parse(
        {"event": "start", "speaker": "kavya", "format": "pcm", "keep_alive": True}
    )
    assert isinstance(start, TtsRequest) and start.incremental
    assert (start.text, start.format, start.keep_alive) == ("", "pcm", True)
    assert parse({"event": "text", "text": "Hi. "}) == TextInput("Hi. ")
    assert parse({"event": "flush"}) == Flush()
    assert parse({"event": "flush", "flush_id": "a"}) == Flush("a")
    assert parse({"event": "flush", "flush_id": 3}) == Flush(3)
    assert parse({"event": "end"}) == End()
    assert error_of({"event": "text", "text": 5}).event == "text"


def test_tts_k2_failed_request_keeps_its_id_and_keep_alive_for_the_reply() -> None:
    error = error_of({"text": "", "request_id": "r-9", "keep_alive": True})
    assert (error.event, error.request_id, error.keep_alive) == ("request", "r-9", True)


def test_tts_h1_rest_body_ignores_websocket_only_fields() -> None:
    body = json.dumps(
        {"text": "a", "keep_alive": "x", "timestamps": 5, "request_id": "bad id"}
    )
    assert parse_rest_body(body.encode()) == TtsRequest(text="a")
    with pytest.raises(TtsProtocolError) as info:
        parse_rest_body(b"\xff{")
    assert info.value.code == "INVALID_JSON"


def test_tts_x3_rate_limit_message_rounds_up() -> None:
    assert rate_limit_message(1) == "Rate limit exceeded. Retry after 1 second."
    assert rate_limit_message(1500) == "Rate limit exceeded. Retry after 2 seconds."
    assert rate_limit_message(3000) == "Rate limit exceeded. Retry after 3 seconds."


def test_tts_x4_error_envelope_is_the_reference_plus_additive_fields() -> None:
    error = Error("VALIDATION_ERROR", "m", "r", fatal=False, valid_speakers=["a"])
    assert server_message(error) == {
        "event": "error",
        "error": {
            "code": "VALIDATION_ERROR",
            "message": "m",
            "request_id": "r",
            "fatal": False,
            "valid_speakers": ["a"],
        },
    }


def test_tts_6_close_codes_statuses_and_fatality_table() -> None:
    assert CLOSE_CODES == {
        "AUTH_FAILED": 1008,
        "RATE_LIMIT_EXCEEDED": 1008,
        "QUOTA_EXCEEDED": 1008,
        "TIMEOUT": 1000,
        "INVALID_JSON": 1003,
        "VALIDATION_ERROR": 1003,
        "MODEL_NOT_LOADED": 1011,
        "STREAMING_OVERLOADED": 1013,
        "INTERNAL_ERROR": 1011,
    }
    assert HTTP_STATUS["QUOTA_EXCEEDED"] == 402 and HTTP_STATUS["TIMEOUT"] == 504
    assert NON_FATAL_CODES == {
        "VALIDATION_ERROR",
        "MODEL_NOT_LOADED",
        "STREAMING_OVERLOADED",
    }
