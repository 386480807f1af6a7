"""Property-based fuzzing of ``/v1/tts/ws`` and ``POST /v1/tts`` (issue 9) through the real
ASGI application, accounts admission and the embedded worker with the fake engine.

Every case opens a socket (or sends a request), sends 1–5 hostile frames and a final ``ping``
whose ``pong`` proves that every earlier frame was answered, and then goes away. The property:
every server frame is sendable UTF-8 and a documented event, every error code and close code is
one the README documents, nothing is logged with a traceback, and afterwards no stream, lease,
worker slot, task or ``started`` usage record is left (``Rig.assert_clean``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import KeyMaker
from tests.fuzz.harness import EXAMPLES, Rig, close_rig, make_rig, send_frame
from tests.fuzz.strategies import any_text, event, field, frames, json_values
from tests.support.leaks import encodable
from tests.tts.test_rest import Response, auth, http
from veena_site.asgi import application

# Thousands of cases: far above the suite's per-test limit, far below CI's.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(1800)]

MESSAGE_CAP = 16 * 1024  # TTS_MAX_MESSAGE_BYTES during the run, so oversize is cheap
# README "Errors": the documented events, codes and close codes of /v1/tts/ws.
EVENTS = {
    "header",
    "progress",
    "complete",
    "error",
    "warning",
    "pong",
    "segment_start",
    "segment_end",
    "flushed",
    "cleared",
}
ERROR_CODES = {
    "AUTH_FAILED",
    "RATE_LIMIT_EXCEEDED",
    "QUOTA_EXCEEDED",
    "TIMEOUT",
    "INVALID_JSON",
    "VALIDATION_ERROR",
    "MODEL_NOT_LOADED",
    "STREAMING_OVERLOADED",
    "INTERNAL_ERROR",
}
WARNING_CODES = {"IGNORED_MESSAGE", "NOT_ACTIVE"}
CLOSE_CODES = {1000, 1001, 1003, 1008, 1009, 1011, 1013}
HTTP_STATUSES = {200, 400, 401, 402, 403, 413, 429, 503, 504}

REQUEST_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "text": st.one_of(
        field("hi", "Hello world. Bye.", "", "   ", "!!!", "Call 5 now."), any_text
    ),
    "speaker": field("male1", "tone", "kavya", "Nobody"),
    "temperature": field(0.0, 0.8, 2.0, 2.5, -1),
    "top_k": field(-1, 0, 50, 1000, 1001, 4096.0),
    "top_p": field(0.5, 1.0, 0.0, 1.1),
    "max_tokens": field(1, 4096, 8192, 0, 8193),
    "repetition_penalty": field(1.0, 1.05, 2.0, 0.9),
    "seed": field(None, 0, 4_294_967_295, 4_294_967_296, -5),
    "chunking": field(True, False),
    "normalize": field(True, False),
    "format": field("wav", "pcm", "mulaw", "ogg"),
    "sample_rate": field(8000, 16000, 22050, 24000, 44100, 48000, 11025),
    "request_id": field("r1", "r2", "a" * 64, "a" * 65, "bad id!"),
    "speed": field(0.5, 1.0, 2.0, 3.0),
    "keep_alive": field(True, False),
    "timestamps": field(True, False),
    "flush_id": field(1, "f", 2**53 - 1, 2**60),
}
TTS_EVENTS = event(
    "event",
    ["request", "start", "ping", "cancel", "clear", "text", "flush", "end", "dance"],
    REQUEST_FIELDS,
)
CASES = st.lists(frames(TTS_EVENTS, MESSAGE_CAP), min_size=1, max_size=5)


def check_event(event: Any) -> None:
    """One server event is a documented one, with documented codes."""
    assert isinstance(event, dict) and event.get("event") in EVENTS, event
    if event["event"] == "error":
        assert event["error"]["code"] in ERROR_CODES, event
        assert isinstance(event["error"]["fatal"], bool)
        assert len(event["error"]["message"]) <= 500
    if event["event"] == "warning":
        assert event["code"] in WARNING_CODES, event


async def tts_case(rig: Rig, sent: list[str | bytes]) -> None:
    comm = WebsocketCommunicator(
        application,
        "/v1/tts/ws",
        headers=[(b"authorization", b"Bearer " + rig.raw_key.encode())],
    )
    connected, _ = await comm.connect(timeout=5)
    assert connected
    try:
        for frame in [*sent, json.dumps({"event": "ping"})]:
            await send_frame(comm, frame)
        while True:
            out = await comm.receive_output(timeout=5)
            if out["type"] == "websocket.close":
                assert out.get("code", 1000) in CLOSE_CODES, out
                break
            if out.get("bytes") is not None:
                continue
            assert encodable(out["text"]), repr(out["text"])[:200]
            event = json.loads(out["text"])
            check_event(event)
            if event["event"] == "pong":
                break
    finally:
        await comm.disconnect()


@pytest.fixture
def rig(keyed: KeyMaker, settings: Any) -> Any:
    settings.TTS_MAX_MESSAGE_BYTES = MESSAGE_CAP
    rig = make_rig(keyed)
    yield rig
    close_rig(rig)


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def test_i9_fuzz_tts_ws(rig: Rig) -> None:
    @FUZZ
    @given(sent=CASES)
    def case(sent: list[str | bytes]) -> None:
        rig.run(lambda r: tts_case(r, sent))

    case()
    rig.report("/v1/tts/ws")


REST_BODIES = st.one_of(
    json_values.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({}, optional=REQUEST_FIELDS).map(
        lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass")
    ),
    frames(TTS_EVENTS, MESSAGE_CAP).map(
        lambda f: f if isinstance(f, bytes) else f.encode("utf-8", "surrogatepass")
    ),
    st.binary(max_size=80),
)


async def rest_case(rig: Rig, body: bytes) -> None:
    comm = http("POST", "/v1/tts", body, auth(rig.raw_key))
    await comm.send_input({"type": "http.request", "body": body})
    start = await comm.receive_output(timeout=10)
    content = b""
    while True:
        part = await comm.receive_output(timeout=10)
        content += part.get("body", b"")
        if not part.get("more_body"):
            break
    await comm.send_input({"type": "http.disconnect"})
    await comm.wait(timeout=5)
    response = Response(start, content)
    assert response.status_code in HTTP_STATUSES, (response.status_code, body[:100])
    if response.status_code != 200:
        error = response.json()["error"]
        assert error["code"] in ERROR_CODES and len(error["message"]) <= 500, error
    else:
        assert response.content


def test_i9_fuzz_rest_tts(rig: Rig) -> None:
    @FUZZ
    @given(body=REST_BODIES)
    def case(body: bytes) -> None:
        rig.run(lambda r: rest_case(r, body))

    case()
    rig.report("POST /v1/tts")
