"""Live requests and responses of the real server (Piper + faster-whisper) validated against
/v1/openapi.json with openapi-core: every REST endpoint, every speech and transcript format,
and the error answers; every server-sent event against the schemas its media type names
(``x-events``, veena_site/openapi/events.py). The document is the one the server itself
serves."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
from openapi_core import Config, OpenAPI
from openapi_core.datatypes import RequestParameters
from openapi_core.deserializing.media_types.util import plain_loads
from openapi_schema_validator import OAS31Validator
from werkzeug.datastructures import Headers, ImmutableMultiDict

from tests.openai_rest.conftest import RestGateway
from tests.openai_rest.test_client_secrets_sdk import SESSION

pytestmark = pytest.mark.slow


@dataclass
class OpenApiRequest:
    """An httpx request as openapi-core reads one."""

    request: httpx.Request
    parameters: RequestParameters = field(init=False)

    def __post_init__(self) -> None:
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(parse_qsl(self.request.url.query.decode())),
            header=Headers(dict(self.request.headers)),
        )

    @property
    def host_url(self) -> str:
        return f"{self.request.url.scheme}://{self.request.url.netloc.decode()}"

    @property
    def path(self) -> str:
        return urlsplit(str(self.request.url)).path

    @property
    def method(self) -> str:
        return self.request.method.lower()

    @property
    def body(self) -> bytes:
        return self.request.read()

    @property
    def content_type(self) -> str:
        return str(self.request.headers.get("content-type", ""))


@dataclass
class OpenApiResponse:
    """An httpx response as openapi-core reads one."""

    response: httpx.Response

    @property
    def status_code(self) -> int:
        return self.response.status_code

    @property
    def content_type(self) -> str:
        # openapi-core hands a content type's parameters to its deserializer as keywords, and
        # one named "encoding" collides with its own argument of that name: drop that one
        # (POST /v1/tts pcm: audio/pcm;rate=R;channels=1;encoding=s16le).
        value = str(self.response.headers.get("content-type", ""))
        return ";".join(p for p in value.split(";") if not p.startswith("encoding="))

    @property
    def headers(self) -> Headers:
        return Headers(dict(self.response.headers))

    @property
    def data(self) -> bytes:
        return self.response.content


def events_of(body: str) -> list[dict[str, Any]]:
    """The JSON of each server-sent event: one ``data:`` line each, no ``event:`` line."""
    blocks = [b for b in body.split("\n\n") if b.strip()]
    assert blocks and all(b.startswith("data: ") and "\n" not in b for b in blocks)
    return [json.loads(b.removeprefix("data: ")) for b in blocks]


def events_validator(document: dict[str, Any], path: str) -> OAS31Validator:
    """The ``x-events`` schema of ``path``'s ``text/event-stream`` answer, its references
    resolved in ``document``."""
    answer = document["paths"][path]["post"]["responses"]["200"]
    events = answer["content"]["text/event-stream"]["x-events"]
    return OAS31Validator({**events, "components": document["components"]})


@dataclass
class Checked:
    """An HTTP client whose every exchange is validated against the served document."""

    http: httpx.Client
    spec: OpenAPI
    document: dict[str, Any]
    key: str
    seen: set[tuple[str, str, int]] = field(default_factory=set)

    def call(
        self,
        method: str,
        path: str,
        *,
        key: str | None = "",
        valid: bool = True,
        **kwargs: Any,
    ) -> httpx.Response:
        """Send; validate the request (unless it is meant to be invalid) and the answer."""
        headers = kwargs.pop("headers", {})
        if key is not None:
            headers["Authorization"] = f"Bearer {key or self.key}"
        request = self.http.build_request(method, path, headers=headers, **kwargs)
        response = self.http.send(request)
        if valid:
            self.spec.validate_request(OpenApiRequest(request))
        self.spec.validate_response(OpenApiRequest(request), OpenApiResponse(response))
        route = path.split("?")[0]
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            validator = events_validator(self.document, route)
            for event in events_of(response.text):
                validator.validate(event)
        self.seen.add((method, route, response.status_code))
        return response


@pytest.fixture(scope="module")
def checked(rest_gateway: RestGateway) -> Iterator[Checked]:
    base = f"http://127.0.0.1:{rest_gateway.port}"
    with httpx.Client(base_url=base, timeout=120) as http:
        served = http.get("/v1/openapi.json")
        assert served.status_code == 200
        # The document types these text bodies as strings; openapi-core decodes only
        # text/plain and text/html by itself.
        texts = {"text/vtt": plain_loads, "text/event-stream": plain_loads}
        config = Config(extra_media_type_deserializers=texts)
        spec = OpenAPI.from_dict(served.json(), config=config)
        yield Checked(http, spec, served.json(), rest_gateway.keys["rest-open"])


SPEECH = {"model": "tts-1", "voice": "alloy", "input": "The quick brown fox jumps."}


@pytest.fixture(scope="module")
def speech_wav(checked: Checked) -> bytes:
    answer = checked.call(
        "POST", "/v1/audio/speech", json=SPEECH | {"response_format": "wav"}
    )
    assert answer.status_code == 200 and answer.content[:4] == b"RIFF"
    return answer.content


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "pcm"])
def test_speech_formats(checked: Checked, fmt: str) -> None:
    answer = checked.call(
        "POST", "/v1/audio/speech", json=SPEECH | {"response_format": fmt}
    )
    assert answer.status_code == 200 and len(answer.content) > 1000


def test_speech_as_server_sent_events(checked: Checked) -> None:
    answer = checked.call(
        "POST", "/v1/audio/speech", json=SPEECH | {"stream_format": "sse"}
    )
    assert answer.status_code == 200 and "speech.audio.done" in answer.text


@pytest.mark.parametrize(
    ("fields", "expect"),
    [
        ({}, "fox"),
        ({"response_format": "text"}, "fox"),
        ({"response_format": "srt"}, "-->"),
        ({"response_format": "vtt"}, "WEBVTT"),
    ],
)
def test_transcription_formats(
    checked: Checked, speech_wav: bytes, fields: dict[str, str], expect: str
) -> None:
    answer = checked.call(
        "POST",
        "/v1/audio/transcriptions",
        data={"model": "whisper-1", **fields},
        files={"file": ("speech.wav", speech_wav, "audio/wav")},
    )
    assert answer.status_code == 200 and expect.lower() in answer.text.lower()


def transcribe(checked: Checked, wav: bytes, **fields: str) -> httpx.Response:
    answer = checked.call(
        "POST",
        "/v1/audio/transcriptions",
        data={"model": "whisper-1", **fields},
        files={"file": ("speech.wav", wav, "audio/wav")},
    )
    assert answer.status_code == 200
    return answer


def test_verbose_json_has_whisper_segments_and_words(
    checked: Checked, speech_wav: bytes
) -> None:
    from openai.types.audio import TranscriptionVerbose

    fields = {"response_format": "verbose_json", "timestamp_granularities[]": "word"}
    body = transcribe(checked, speech_wav, **fields).json()
    verbose = TranscriptionVerbose.model_validate(body)  # the SDK's model, strictly
    assert verbose.segments and verbose.words and "fox" in verbose.text.lower()
    assert all(s.tokens and s.avg_logprob < 0 for s in verbose.segments)
    starts = [w.start for w in verbose.words]
    assert starts == sorted(starts)
    assert all(w.start <= w.end <= verbose.duration for w in verbose.words)


def test_streamed_transcription_events(checked: Checked, speech_wav: bytes) -> None:
    from openai._models import construct_type
    from openai.types.audio import TranscriptionStreamEvent, TranscriptionTextDeltaEvent

    events = events_of(transcribe(checked, speech_wav, stream="true").text)
    *deltas, done = events
    assert done["type"] == "transcript.text.done" and "fox" in done["text"].lower()
    # A delta a word (issue 34), joined exactly to the text; each an SDK model, strictly.
    assert [TranscriptionTextDeltaEvent.model_validate(d).delta for d in deltas] == [
        (" " if i else "") + w for i, w in enumerate(done["text"].split())
    ]
    parsed = construct_type(
        type_=TranscriptionStreamEvent, value=done
    )  # as the SDK does
    assert parsed.type == "transcript.text.done" and parsed.usage is not None
    assert parsed.usage.type == "duration" and parsed.usage.seconds >= 1
    # The event schemas constrain: a delta without its text is refused.
    validator = events_validator(checked.document, "/v1/audio/transcriptions")
    assert not validator.is_valid({"type": "transcript.text.delta"})


def test_models(checked: Checked) -> None:
    listed = checked.call("GET", "/v1/models").json()
    assert {m["id"] for m in listed["data"]} >= {"tts-1", "whisper-1"}
    assert checked.call("GET", "/v1/models/whisper-1").status_code == 200
    assert checked.call("GET", "/v1/models/no-such-model").status_code == 404


@pytest.mark.parametrize("fmt", ["wav", "pcm", "mulaw"])
def test_post_v1_tts(checked: Checked, fmt: str) -> None:
    body = {"text": "Hello there.", "format": fmt}
    if fmt == "mulaw":
        body["sample_rate"] = 8000
    answer = checked.call(
        "POST", "/v1/tts", json=body, headers={"X-Request-Id": "oas-1"}
    )
    assert answer.status_code == 200 and answer.headers["x-request-id"] == "oas-1"
    if fmt == "pcm":
        assert answer.headers["content-type"].endswith(";encoding=s16le")


def test_post_v1_tts_word_timestamps_is_json(checked: Checked) -> None:
    body = {"text": "Hello big world.", "word_timestamps": True}
    answer = checked.call("POST", "/v1/tts", json=body).json()
    assert [w["word"] for w in answer["words"]] == ["Hello", "big", "world"]
    assert base64.b64decode(answer["audio_base64"])[:4] == b"RIFF"


def test_speech_word_timestamps_extension(checked: Checked) -> None:
    timed = SPEECH | {"stream_format": "sse", "word_timestamps": True}
    answer = checked.call("POST", "/v1/audio/speech", json=timed)
    assert answer.status_code == 200 and '"speech.audio.words"' in answer.text
    unstreamed = SPEECH | {"word_timestamps": True}
    refused = checked.call("POST", "/v1/audio/speech", json=unstreamed, valid=False)
    assert refused.json()["error"]["param"] == "word_timestamps"


def test_speakers_and_voices(checked: Checked) -> None:
    speakers = checked.call("GET", "/v1/tts/speakers").json()
    assert speakers["ready"] is True
    voices = checked.call("GET", "/v1/audio/voices").json()
    assert voices["voices"] == [s["id"] for s in speakers["speakers"]]
    assert (
        checked.call("GET", "/v1/audio/voices", key=None, valid=False).status_code
        == 401
    )


TTS_SESSION = {"type": "tts", "voice": "male1", "format": "pcm", "sample_rate": 24000}


def test_client_secrets_minted_and_refused_on_rest(checked: Checked) -> None:
    expiry = {"anchor": "created_at", "seconds": 60}
    realtime = checked.call(
        "POST",
        "/v1/realtime/client_secrets",
        json={"expires_after": expiry, "session": SESSION},
    ).json()
    assert realtime["session"]["audio"]["input"]["format"]["rate"] == 24000
    tts = checked.call(
        "POST", "/v1/tts/client_secrets", json={"session": TTS_SESSION}
    ).json()
    assert tts["session"]["format"] == "pcm"
    for secret in (realtime["value"], tts["value"]):
        assert checked.call("GET", "/v1/audio/voices", key=secret).status_code == 401
        minted = checked.call("POST", "/v1/tts/client_secrets", key=secret, json={})
        assert minted.status_code == 401
    for path in ("/v1/realtime/client_secrets", "/v1/tts/client_secrets"):
        anonymous = checked.call("POST", path, json={}, key=None, valid=False)
        assert anonymous.status_code == 401


@pytest.mark.parametrize(
    ("path", "body", "expect"),
    [
        (
            "/v1/realtime/client_secrets",
            {"expires_after": {"anchor": "created_at", "seconds": 5}},
            "expires_after.seconds",
        ),
        (
            "/v1/realtime/client_secrets",
            {"session": {"type": "realtime"}},
            "session.type",
        ),
        (
            "/v1/realtime/client_secrets",
            {"session": SESSION | {"voice": "alloy"}},
            "session.voice",
        ),
        (
            "/v1/tts/client_secrets",
            {"session": {"sample_rate": 24000}},
            "VALIDATION_ERROR",
        ),
        (
            "/v1/tts/client_secrets",
            {"session": {"type": "tts", "pitch": 2}},
            "VALIDATION_ERROR",
        ),
        (
            "/v1/tts/client_secrets",
            {"expires_after": {"seconds": 7201}},
            "VALIDATION_ERROR",
        ),
    ],
)
def test_client_secret_errors(
    checked: Checked, path: str, body: dict[str, Any], expect: str
) -> None:
    refused = checked.call("POST", path, json=body, valid=False)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert expect in (error.get("param"), error["code"])


def test_usage_api(checked: Checked, speech_wav: bytes) -> None:
    start = int(time.time()) - 86400
    for kind in ("audio_speeches", "audio_transcriptions"):
        path = f"/v1/organization/usage/{kind}"
        query = f"?start_time={start}&bucket_width=1h&group_by=model&limit=30"
        assert checked.call("GET", path + query).status_code == 200
        missing = checked.call("GET", path + "?bucket_width=1h", valid=False)
        assert missing.status_code == 400


def test_probes(checked: Checked) -> None:
    assert checked.call("GET", "/healthz", key=None).status_code == 200
    assert checked.call("GET", "/readyz", key=None).status_code == 200


def test_errors_are_the_documented_envelopes(checked: Checked) -> None:
    refused = checked.call("GET", "/v1/models", key="vk_live_" + "x" * 38)
    assert refused.status_code == 401
    bad = checked.call(
        "POST", "/v1/audio/speech", json=SPEECH | {"speed": 9}, valid=False
    )
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "speed"
    anonymous = checked.call(
        "POST", "/v1/tts", json={"text": "Hi"}, key=None, valid=False
    )
    assert anonymous.status_code == 401
    too_fast = checked.call(
        "POST", "/v1/tts", json={"text": "Hi", "speed": 4}, valid=False
    )
    assert too_fast.json()["error"]["code"] == "VALIDATION_ERROR"
    assert (
        checked.call("GET", "/v1/tts/speakers", key=None, valid=False).status_code
        == 401
    )
    unreadable = checked.call(
        "POST",
        "/v1/audio/transcriptions",
        data={"model": "whisper-1"},
        files={"file": ("x.wav", b"not audio", "audio/wav")},
    )
    assert unreadable.status_code == 400
