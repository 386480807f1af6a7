"""Wire schema without sockets: parsing (ER-5, VL-9) and session configuration (§5, VL-2)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from openai.types.realtime import RealtimeServerEvent
from pydantic import TypeAdapter

from asr.config import (
    ConfigError,
    Models,
    SessionConfig,
    TurnDetection,
    beta_session_object,
    default_config,
    session_object,
)
from asr.event_schema import error_event, server_event, vllm_done, vllm_error
from asr.protocol import (
    Dialect,
    RealtimeProtocolError,
    VllmSessionUpdate,
    new_id,
    parse_client_event,
)
from asr.updates import validate_update
from asr.vllm_update import validate_vllm_update

MODELS = Models(
    served="whisper-tiny.en",
    aliases=(
        "whisper-1",
        "gpt-4o-transcribe",
        "gpt-4o-mini-transcribe",
        "gpt-realtime-whisper",
    ),
    english_only=True,
)
DEFAULT = SessionConfig(model="whisper-tiny.en")
GA = TypeAdapter(RealtimeServerEvent)


def ga(**input_: Any) -> dict[str, Any]:
    return {"type": "transcription", "audio": {"input": input_}}


def fails(session: Any, *, beta: bool = False) -> tuple[str, str | None]:
    with pytest.raises(ConfigError) as exc:
        validate_update(session, DEFAULT, MODELS, beta=beta)
    return exc.value.code, exc.value.param


# Parsing.


def test_asr_er5_invalid_json_is_invalid_payload_without_param() -> None:
    with pytest.raises(RealtimeProtocolError) as exc:
        parse_client_event("{not json", None)
    assert (exc.value.code, exc.value.param) == ("invalid_payload", None)


def test_asr_vl9_invalid_json_in_vllm_is_invalid_json() -> None:
    with pytest.raises(RealtimeProtocolError) as exc:
        parse_client_event("{", None, dialect=Dialect.VLLM)
    assert (exc.value.code, exc.value.message) == ("invalid_json", "Invalid JSON")


@pytest.mark.parametrize(
    ("text", "param"),
    [("[1, 2]", None), ('{"event_id": "x"}', "type"), ('{"type": 3}', "type")],
)
def test_asr_er5_bad_shape_is_invalid_payload(text: str, param: str | None) -> None:
    with pytest.raises(RealtimeProtocolError) as exc:
        parse_client_event(text, None)
    assert (exc.value.code, exc.value.param) == ("invalid_payload", param)


def test_asr_ai2_binary_frame_is_invalid_payload() -> None:
    with pytest.raises(RealtimeProtocolError) as exc:
        parse_client_event(None, b"\x00\x01")
    assert exc.value.code == "invalid_payload"
    assert exc.value.message.startswith("Binary frames are not supported")


@pytest.mark.parametrize(
    "kind", ["made.up.event", "response.create", "conversation.item.create"]
)
def test_asr_er5_unknown_event_message(kind: str) -> None:
    with pytest.raises(RealtimeProtocolError) as exc:
        parse_client_event(f'{{"type": "{kind}", "event_id": "e1"}}', None)
    assert exc.value.code == "unknown_event"
    assert exc.value.message == f"Unknown event type: '{kind}'."


def test_asr_vl9_clear_is_unknown_in_vllm() -> None:
    with pytest.raises(RealtimeProtocolError) as exc:
        parse_client_event(
            '{"type": "input_audio_buffer.clear"}', None, dialect=Dialect.VLLM
        )
    assert exc.value.code == "unknown_event"
    assert exc.value.message == "Unknown event type: input_audio_buffer.clear"


def test_asr_er1_event_id_kept_only_when_a_string() -> None:
    assert (
        parse_client_event(
            '{"type": "input_audio_buffer.clear", "event_id": "e"}', None
        ).event_id
        == "e"
    )
    assert (
        parse_client_event(
            '{"type": "input_audio_buffer.clear", "event_id": 5}', None
        ).event_id
        is None
    )


def test_asr_it1_ids_have_prefix_and_16_random_characters() -> None:
    ids = {new_id("item_") for _ in range(100)}
    assert len(ids) == 100
    assert all(i.startswith("item_") and len(i) == 21 and i[5:].isalnum() for i in ids)


# SE-9, in order.


@pytest.mark.parametrize(
    ("session", "expected"),
    [
        (None, ("invalid_value", "session")),
        ("x", ("invalid_value", "session")),
        ({"audio": {}}, ("missing_required_parameter", "session.type")),
        ({"type": "realtime"}, ("not_supported", "session.type")),
        (ga(foo=1), ("unknown_parameter", "session.audio.input.foo")),
        ({"type": "transcription", "bar": 1}, ("unknown_parameter", "session.bar")),
        (
            ga(format={"type": "audio/wav"}),
            ("invalid_value", "session.audio.input.format.type"),
        ),
        (
            ga(format={"rate": 24000}),
            ("invalid_value", "session.audio.input.format.type"),
        ),
        (ga(format="pcm"), ("invalid_value", "session.audio.input.format")),
        ({"type": "transcription", "audio": 5}, ("invalid_value", "session.audio")),
        (
            ga(transcription={"language": 5}),
            ("invalid_value", "session.audio.input.transcription.language"),
        ),
        (
            ga(turn_detection={"threshold": 0.5}),
            ("invalid_value", "session.audio.input.turn_detection.type"),
        ),
        (
            ga(format={"type": "audio/pcm", "rate": 44100}),
            ("invalid_value", "session.audio.input.format.rate"),
        ),
        (
            ga(format={"type": "audio/pcmu", "rate": 16000}),
            ("invalid_value", "session.audio.input.format.rate"),
        ),
        (
            ga(transcription={"model": "foo"}),
            ("not_supported", "session.audio.input.transcription.model"),
        ),
        (
            ga(transcription={"language": "de"}),
            ("invalid_value", "session.audio.input.transcription.language"),
        ),
        (
            ga(transcription={"keywords": ["a"]}),
            ("not_supported", "session.audio.input.transcription.keywords"),
        ),
        (
            ga(transcription={"delay": "low"}),
            ("not_supported", "session.audio.input.transcription.delay"),
        ),
        (
            ga(turn_detection={"type": "semantic_vad"}),
            ("not_supported", "session.audio.input.turn_detection.type"),
        ),
        (
            ga(turn_detection={"type": "server_vad", "idle_timeout_ms": 5000}),
            ("not_supported", "session.audio.input.turn_detection.idle_timeout_ms"),
        ),
        (
            ga(turn_detection={"type": "server_vad", "threshold": 1.5}),
            ("invalid_value", "session.audio.input.turn_detection.threshold"),
        ),
        (
            ga(turn_detection={"type": "server_vad", "silence_duration_ms": 10001}),
            ("invalid_value", "session.audio.input.turn_detection.silence_duration_ms"),
        ),
        (
            ga(noise_reduction={"type": "studio"}),
            ("invalid_value", "session.audio.input.noise_reduction.type"),
        ),
        (
            {"type": "transcription", "include": ["foo"]},
            ("invalid_value", "session.include"),
        ),
        (
            {"type": "transcription", "include": "foo"},
            ("invalid_value", "session.include"),
        ),
        (
            ga(transcription={"transcript": "joined"}),
            ("invalid_value", "session.audio.input.transcription.transcript"),
        ),
        (
            ga(transcription={"transcript": 1}),
            ("invalid_value", "session.audio.input.transcription.transcript"),
        ),
        (
            ga(transcription={"timestamp_granularities": ["segment"]}),
            (
                "invalid_value",
                "session.audio.input.transcription.timestamp_granularities",
            ),
        ),
        (
            ga(transcription={"timestamp_granularities": "word"}),
            (
                "invalid_value",
                "session.audio.input.transcription.timestamp_granularities",
            ),
        ),
    ],
)
def test_asr_se9_first_failure_with_code_and_param(
    session: Any, expected: tuple[str, str]
) -> None:
    assert fails(session) == expected


def test_asr_se9_unknown_key_is_reported_before_value_errors() -> None:
    session = ga(format={"type": "audio/pcm", "rate": 44100}, foo=1)
    assert fails(session) == ("unknown_parameter", "session.audio.input.foo")
    with pytest.raises(ConfigError) as exc:
        validate_update(session, DEFAULT, MODELS)
    assert exc.value.message == "Unknown parameter: 'session.audio.input.foo'."


def test_asr_se9_semantic_vad_message_is_the_spec_text() -> None:
    with pytest.raises(ConfigError) as exc:
        validate_update(ga(turn_detection={"type": "semantic_vad"}), DEFAULT, MODELS)
    assert exc.value.message == (
        "turn_detection type 'semantic_vad' is not supported; use 'server_vad' or null."
    )


def test_asr_se9_read_only_fields_are_ignored() -> None:
    session = {"type": "transcription", "id": "sess_x", "object": "o", "expires_at": 1}
    assert validate_update(session, DEFAULT, MODELS) == DEFAULT


def test_asr_se9_multilingual_model_accepts_any_whisper_language() -> None:
    models = dataclasses.replace(MODELS, english_only=False)
    new = validate_update(ga(transcription={"language": "de"}), DEFAULT, models)
    assert new.language == "de"
    with pytest.raises(ConfigError):
        validate_update(ga(transcription={"language": "xx"}), DEFAULT, models)


# SE-5, SE-3, SE-7.


def test_asr_se5_transcription_merges_key_by_key() -> None:
    first = validate_update(
        ga(transcription={"model": "whisper-1", "language": "en", "prompt": "Django"}),
        DEFAULT,
        MODELS,
    )
    second = validate_update(ga(transcription={"prompt": None}), first, MODELS)
    assert (second.model, second.language, second.prompt) == ("whisper-1", "en", None)
    reset = validate_update(ga(transcription=None), first, MODELS)
    assert (reset.model, reset.language, reset.prompt) == (
        "whisper-tiny.en",
        None,
        None,
    )
    served = validate_update(ga(transcription={"model": None}), first, MODELS)
    assert served.model == "whisper-tiny.en"


def test_asr_se5_units_are_replaced_and_defaults_filled() -> None:
    vad = validate_update(
        ga(
            turn_detection={
                "type": "server_vad",
                "threshold": 0.7,
                "create_response": True,
            }
        ),
        DEFAULT,
        MODELS,
    )
    assert vad.turn_detection == TurnDetection(threshold=0.7)
    again = validate_update(ga(turn_detection={"type": "server_vad"}), vad, MODELS)
    assert again.turn_detection == TurnDetection()
    off = validate_update(ga(turn_detection=None), again, MODELS)
    assert off.turn_detection is None
    fmt = validate_update(ga(format={"type": "audio/pcmu"}), DEFAULT, MODELS)
    assert (fmt.format, fmt.rate) == ("audio/pcmu", 8000)
    back = validate_update(ga(format=None), fmt, MODELS)
    assert (back.format, back.rate) == ("audio/pcm", 24000)


def test_asr_se7_identical_update_is_not_a_change() -> None:
    full = ga(
        format={"type": "audio/pcm", "rate": 24000},
        transcription={"model": "gpt-realtime-whisper", "language": "en"},
        turn_detection=None,
        noise_reduction={"type": "near_field"},
    )
    once = validate_update(full, DEFAULT, MODELS)
    assert validate_update(full, once, MODELS) == once


def test_asr_se1_created_session_object_defaults() -> None:
    config = default_config(MODELS, query_model=None, turn=None, vllm=False)
    obj = session_object(
        config, session_id="sess_D8kT2wQ5nR1xV6bZ", expires_at=1767227400
    )
    assert obj == {
        "type": "transcription",
        "id": "sess_D8kT2wQ5nR1xV6bZ",
        "object": "realtime.transcription_session",
        "expires_at": 1767227400,
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "noise_reduction": None,
                "transcription": {
                    "model": "whisper-tiny.en",
                    "language": None,
                    "prompt": None,
                },
                "turn_detection": None,
            }
        },
        "include": None,
    }


def test_asr_se2_query_model_and_default_turn_detection() -> None:
    config = default_config(
        MODELS, query_model="whisper-1", turn={"type": "server_vad"}, vllm=False
    )
    assert config.model == "whisper-1"
    echoed = session_object(config, session_id="s", expires_at=0)["audio"]["input"]
    assert echoed["turn_detection"] == {
        "type": "server_vad",
        "threshold": 0.5,
        "prefix_padding_ms": 300,
        "silence_duration_ms": 500,
    }
    unknown = default_config(MODELS, query_model="gpt-5", turn=None, vllm=True)
    assert (unknown.model, unknown.rate) == ("whisper-tiny.en", 16000)


# SE-12 (beta).


def test_asr_se12_beta_update_maps_onto_the_session() -> None:
    session = {
        "input_audio_format": "g711_ulaw",
        "input_audio_transcription": {"model": "whisper-1", "language": "en"},
        "turn_detection": {"type": "server_vad"},
        "input_audio_noise_reduction": {"type": "far_field"},
        "modalities": ["text"],
    }
    new = validate_update(session, DEFAULT, MODELS, beta=True)
    assert (new.format, new.rate, new.model, new.language) == (
        "audio/pcmu",
        8000,
        "whisper-1",
        "en",
    )
    echo = beta_session_object(new, session_id="sess_x")
    assert echo["input_audio_format"] == "g711_ulaw"
    assert echo["turn_detection"]["silence_duration_ms"] == 500
    assert echo["input_audio_noise_reduction"] == {"type": "far_field"}
    assert echo["modalities"] == ["text"]


def test_asr_se12_beta_errors_use_beta_paths() -> None:
    assert fails({"input_audio_format": "wav"}, beta=True) == (
        "invalid_value",
        "session.input_audio_format",
    )
    assert fails({"input_audio_transcription": {"model": "foo"}}, beta=True) == (
        "not_supported",
        "session.input_audio_transcription.model",
    )
    assert fails({"audio": {}}, beta=True) == ("unknown_parameter", "session.audio")


# VL-2.


def test_asr_vl2_vllm_update_rules() -> None:
    def code(event: dict[str, Any]) -> tuple[str, str]:
        with pytest.raises(ConfigError) as exc:
            validate_vllm_update(VllmSessionUpdate(**event), DEFAULT, MODELS)
        return exc.value.code, exc.value.message

    assert code({}) == ("invalid_event", "Missing required field: model")
    assert code({"model": "nonexistent-model"}) == (
        "model_not_found",
        "The model `nonexistent-model` does not exist.",
    )
    assert code({"model": "whisper-1", "include": ["x"]})[0] == "invalid_event"
    assert "include" in code({"model": "whisper-1", "include": ["x"]})[1]
    assert code({"model": "whisper-1", "language": "de"})[0] == "invalid_event"
    new = validate_vllm_update(
        VllmSessionUpdate(model="whisper-1", language="en", prompt="p"),
        DEFAULT,
        MODELS,
    )
    assert (new.model, new.language, new.prompt) == ("whisper-1", "en", "p")
    assert new.transcript == "final"
    assert code({"model": "whisper-1", "transcript": "all"})[0] == "invalid_event"
    exact = VllmSessionUpdate(model="whisper-1", transcript="deltas")
    assert validate_vllm_update(exact, DEFAULT, MODELS).transcript == "deltas"
    # Replaced as a whole (VL-2): an update without it is back to "final".
    plain = VllmSessionUpdate(model="whisper-1")
    exact_config = validate_vllm_update(exact, DEFAULT, MODELS)
    assert validate_vllm_update(plain, exact_config, MODELS).transcript == "final"


def test_transcript_and_word_times_options_merge_and_echo_when_set() -> None:
    """Issue 34: the ``transcription`` extensions merge like its other keys and are echoed
    only away from their defaults, so the OpenAI object is unchanged otherwise."""
    options = {"transcript": "deltas", "timestamp_granularities": ["word"]}
    new = validate_update(ga(transcription=options), DEFAULT, MODELS)
    assert (new.transcript, new.words, new.model) == ("deltas", True, DEFAULT.model)
    echo = session_object(new, session_id="s", expires_at=1)
    transcription = echo["audio"]["input"]["transcription"]
    assert transcription["transcript"] == "deltas"
    assert transcription["timestamp_granularities"] == ["word"]
    GA.validate_python(server_event("session.updated", session=echo))
    kept = validate_update(ga(transcription={"language": "en"}), new, MODELS)
    assert (kept.transcript, kept.words) == ("deltas", True)
    back = validate_update(ga(transcription={"transcript": None}), kept, MODELS)
    assert back.transcript == "final" and back.words
    reset = validate_update(ga(transcription=None), kept, MODELS)
    assert (reset.transcript, reset.timestamp_granularities) == ("final", None)
    plain = session_object(reset, session_id="s", expires_at=1)
    assert set(plain["audio"]["input"]["transcription"]) == {
        "model",
        "language",
        "prompt",
    }
    beta = {"input_audio_transcription": {"transcript": "deltas"}}
    assert validate_update(beta, DEFAULT, MODELS, beta=True).transcript == "deltas"


# Server events.


def test_asr_t_v1_server_events_validate_and_rates_are_the_only_deviation() -> None:
    config = dataclasses.replace(DEFAULT, rate=48000)
    event = server_event(
        "session.updated", session=session_object(config, session_id="s", expires_at=1)
    )
    assert event["session"]["audio"]["input"]["format"]["rate"] == 48000
    with pytest.raises(ValueError):
        GA.validate_python(event)  # the SDK pins 24000
    with pytest.raises(ValueError):
        server_event("input_audio_buffer.committed", item_id=5)


def test_asr_au5_retry_hint_is_an_extra_field() -> None:
    event = error_event("too_many_sessions", "Retry after 2.0 s.", retry_after_ms=2000)
    assert event["error"]["type"] == "rate_limit_exceeded"
    assert event["error"]["retry_after_ms"] == 2000
    GA.validate_python(event)


def test_asr_vl1_vllm_events_have_exact_keys() -> None:
    assert vllm_error("invalid_json", "Invalid JSON") == {
        "type": "error",
        "error": "Invalid JSON",
        "code": "invalid_json",
    }
    assert vllm_done("Hello world.", 4, 4) == {
        "type": "transcription.done",
        "text": "Hello world.",
        "usage": {
            "prompt_tokens": 4,
            "completion_tokens": 4,
            "total_tokens": 8,
            "prompt_tokens_details": None,
        },
    }
