"""Property-based fuzzing of ``/v1/realtime`` in both dialects (issue 9) through the real ASGI
application, accounts admission and the embedded worker with the fake engine.

Every case opens a session (OpenAI dialect, auto-detected; or ``?dialect=vllm``), sometimes
before ``session.created`` has arrived, sends 1–5 hostile frames and an unknown event whose
``unknown_event`` error proves that every earlier frame was answered, and then goes away. The
property is the one of ``test_fuzz_tts``: sendable, documented events and codes only, no
traceback, and nothing left behind.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from hypothesis import given
from hypothesis import strategies as st

from asr.config import LOGPROBS_INCLUDE
from tests.conftest import KeyMaker
from tests.fuzz.harness import Rig, close_rig, make_rig, send_frame
from tests.fuzz.strategies import any_text, b64_audio, event, field, frames
from tests.fuzz.test_fuzz_tts import FUZZ
from tests.support.leaks import encodable
from veena_site.asgi import application

# Thousands of cases: far above the suite's per-test limit, far below CI's.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(1800)]

MESSAGE_CAP = 64 * 1024  # ASR_MAX_MESSAGE_BYTES during the run, so oversize is cheap
SENTINEL = "fuzz.sentinel"
# README and docs/specs/realtime-asr.md §10–§11: the documented events, codes and close codes.
OPENAI_EVENTS = {
    "session.created",
    "session.updated",
    "transcription_session.updated",
    "input_audio_buffer.committed",
    "input_audio_buffer.cleared",
    "input_audio_buffer.speech_started",
    "input_audio_buffer.speech_stopped",
    "conversation.item.added",
    "conversation.item.created",
    "conversation.item.done",
    "conversation.item.input_audio_transcription.delta",
    "conversation.item.input_audio_transcription.completed",
    "conversation.item.input_audio_transcription.failed",
    "error",
}
VLLM_EVENTS = {
    "session.created",
    "session.updated",
    "transcription.delta",
    "transcription.done",
    "error",
}
ERROR_CODES = {
    "invalid_payload",
    "invalid_json",
    "invalid_event",
    "unknown_event",
    "invalid_value",
    "missing_required_parameter",
    "unknown_parameter",
    "not_supported",
    "invalid_audio",
    "invalid_audio_format",
    "input_audio_buffer_commit_empty",
    "model_not_validated",
    "model_not_found",
    "internal_error",
    "processing_error",
    "buffer_overflow",
    "message_too_large",
    "rate_limit_exceeded",
    "too_many_sessions",
    "insufficient_quota",
    "invalid_api_key",
    "origin_not_allowed",
    "endpoint_not_allowed",
    "service_unavailable",
    "engine_unavailable",
    "inference_failed",
    "lease_lost",
    "usage_unavailable",
    "idle_timeout",
    "session_expired",
}
CLOSE_CODES = {1000, 1001, 1008, 1009, 1011, 1013}

RATES = (8000, 16000, 24000, 44100, 48000)
TURN = st.fixed_dictionaries(
    {},
    optional={
        "type": field("server_vad", "semantic_vad", None),
        "threshold": field(0.5, 0, 1, 1.5),
        "prefix_padding_ms": field(300, 0, 10_000, 10_001),
        "silence_duration_ms": field(500, 0, 10_001),
        "idle_timeout_ms": field(None, 100),
        "create_response": field(True),
    },
)
TRANSCRIPTION = st.fixed_dictionaries(
    {},
    optional={
        "model": field("whisper-1", "whisper-tiny.en", None, "nope"),
        "language": field("en", "fr", None, "xx"),
        "prompt": st.one_of(field("Django", None, "p" * 2001), any_text),
        "keywords": field(None, ["a"]),
    },
)
INPUT = st.fixed_dictionaries(
    {},
    optional={
        "format": st.fixed_dictionaries(
            {},
            optional={
                "type": field("audio/pcm", "audio/pcmu", "audio/pcma", "audio/x"),
                "rate": field(*RATES),
            },
        )
        | field(None),
        "transcription": TRANSCRIPTION | field(None),
        "turn_detection": TURN | field(None),
        "noise_reduction": st.fixed_dictionaries(
            {}, optional={"type": field("near_field", "far_field", "x")}
        )
        | field(None),
    },
)
SESSION = st.fixed_dictionaries(
    {},
    optional={
        "type": field("transcription", "realtime"),
        "audio": st.fixed_dictionaries({}, optional={"input": INPUT}) | field(None),
        "include": field([LOGPROBS_INCLUDE], ["x"], [LOGPROBS_INCLUDE] * 5, None),
        "input_audio_format": field("pcm16", "g711_ulaw", "g711_alaw", "x"),
        "input_audio_transcription": TRANSCRIPTION | field(None),
        "turn_detection": TURN | field(None),
        "input_audio_noise_reduction": field({"type": "near_field"}, None),
    },
)
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "event_id": st.one_of(field("e1", None, "e" * 513), any_text),
    "audio": st.one_of(b64_audio(), field("", "!!", "AAA=")),
    "session": SESSION | field(None),
    "model": field("whisper-1", "whisper-tiny.en", "nope", None),
    "prompt": field("Django", "p" * 2001, None),
    "language": field("en", "fr", "xx", None),
    "include": field([LOGPROBS_INCLUDE], ["x"], None),
    "final": field(True, False),
}
NAMES = [
    "session.update",
    "transcription_session.update",
    "input_audio_buffer.append",
    "input_audio_buffer.append",
    "input_audio_buffer.append",
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
    "response.create",
]
CASES = st.tuples(
    st.booleans(),  # wait for session.created first
    st.lists(frames(event("type", NAMES, FIELDS), MESSAGE_CAP), min_size=1, max_size=5),
)


def check_event(event: Any) -> bool:
    """One server event is documented; True when it answers the sentinel."""
    assert isinstance(event, dict), event
    kind = event.get("type")
    assert kind in OPENAI_EVENTS | VLLM_EVENTS, event
    if kind != "error":
        return False
    if isinstance(event["error"], dict):  # OpenAI envelope
        assert event["error"]["code"] in ERROR_CODES, event
        return SENTINEL in event["error"]["message"]
    assert event["code"] in ERROR_CODES, event  # vLLM's flat error
    return SENTINEL in event["error"]


async def realtime_case(
    rig: Rig, path: str, wait_created: bool, sent: list[str | bytes]
) -> None:
    comm = WebsocketCommunicator(
        application,
        path,
        headers=[(b"authorization", b"Bearer " + rig.raw_key.encode())],
    )
    connected, _ = await comm.connect(timeout=5)
    assert connected
    try:
        if wait_created:
            first = json.loads((await comm.receive_output(timeout=5))["text"])
            assert first["type"] == "session.created", first
        for frame in [*sent, json.dumps({"type": SENTINEL})]:
            await send_frame(comm, frame)
        while True:
            out = await comm.receive_output(timeout=5)
            if out["type"] == "websocket.close":
                assert out.get("code", 1000) in CLOSE_CODES, out
                break
            assert out.get("text") is not None, out
            assert encodable(out["text"]), repr(out["text"])[:200]
            if check_event(json.loads(out["text"])):
                break
    finally:
        await comm.disconnect()


@pytest.fixture
def rig(keyed: KeyMaker, settings: Any) -> Any:
    settings.ASR_MAX_MESSAGE_BYTES = MESSAGE_CAP
    settings.ASR_MAX_EARLY_BYTES = MESSAGE_CAP // 2
    rig = make_rig(keyed)
    yield rig
    close_rig(rig)


@pytest.mark.parametrize(
    "path", ["/v1/realtime", "/v1/realtime?dialect=vllm"], ids=["openai", "vllm"]
)
def test_i9_fuzz_realtime(rig: Rig, path: str) -> None:
    @FUZZ
    @given(case=CASES)
    def case(case: tuple[bool, list[str | bytes]]) -> None:
        wait_created, sent = case
        rig.run(lambda r: realtime_case(r, path, wait_created, sent))

    case()
    rig.report(path)
