"""``POST /v1/tts`` and ``GET /v1/tts/speakers`` (docs/specs/tts-ws.md §13) through the real ASGI
application (Django's handler under the Channels router), with the embedded worker."""

from __future__ import annotations

import asyncio
import io
import json
import time
import wave
from typing import Any

import numpy as np
import pytest
from channels.layers import get_channel_layer
from channels.testing import ApplicationCommunicator

from gateway.liveness import get_liveness
from gateway.pcm import ulaw2lin
from tests.tts.conftest import Opener
from tts.client import ChannelJob, JobError
from tts.messages import TtsSubmit
from veena_site.asgi import application
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "Hello world. How are you today?"


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class Response:
    """What an HTTP client got back."""

    def __init__(self, start: dict[str, Any], body: bytes) -> None:
        self.status_code = start["status"]
        self.headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
        self.content = body

    def __getitem__(self, name: str) -> str:
        return self.headers[name.lower()]

    def json(self) -> Any:
        return json.loads(self.content)


def http(
    method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> ApplicationCommunicator:
    """An HTTP request to the ASGI application; its body is sent at once."""
    raw_path, _, query = path.partition("?")
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "path": raw_path,
        "query_string": query.encode(),
        "headers": [
            (k.lower().encode(), v.encode())
            for k, v in {"Host": "127.0.0.1", **(headers or {})}.items()
        ],
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 50000),
    }
    return ApplicationCommunicator(application, scope)


async def request(
    method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> Response:
    comm = http(method, path, body, headers)
    await comm.send_input({"type": "http.request", "body": body})
    start = await comm.receive_output(timeout=30)
    content = b""
    while True:
        part = await comm.receive_output(timeout=30)
        content += part.get("body", b"")
        if not part.get("more_body"):
            return Response(start, content)


async def post(
    body: Any,
    key: str | None = None,
    headers: dict[str, str] | None = None,
    path: str = "/v1/tts",
) -> Response:
    data = (
        body
        if isinstance(body, bytes)
        else (body if isinstance(body, str) else json.dumps(body)).encode()
    )
    all_headers = {
        "Content-Type": "application/json",
        **(auth(key) if key else {}),
        **(headers or {}),
    }
    return await request("POST", path, data, all_headers)


async def test_tts_h1_h2_wav_with_true_sizes_and_metadata_headers(
    embedded_worker: WorkerRuntime, api_key: str
) -> None:
    response = await post(
        {"text": "r" * 100, "sample_rate": 24000}, api_key, {"X-Request-Id": "rest-1"}
    )
    assert response.status_code == 200, response.content
    body = response.content
    assert response["Content-Type"] == "audio/wav"
    assert int(response["Content-Length"]) == len(body)
    assert response["X-Request-Id"] == "rest-1"
    assert response["X-Sample-Rate"] == "24000" and response["X-Speaker"] == "tone"
    assert response["X-Audio-Duration-Seconds"] == "1.00"
    data_bytes = len(body) - 44
    assert int.from_bytes(body[4:8], "little") == 36 + data_bytes
    assert int.from_bytes(body[40:44], "little") == data_bytes
    with wave.open(io.BytesIO(body)) as wav:
        assert (wav.getframerate(), wav.getnframes()) == (24000, data_bytes // 2)


async def test_tts_h2_pcm_and_mulaw_content_types(
    embedded_worker: WorkerRuntime, api_key: str
) -> None:
    pcm = await post({"text": "p" * 50, "format": "pcm", "sample_rate": 48000}, api_key)
    assert pcm["Content-Type"] == "audio/pcm;rate=48000;channels=1;encoding=s16le"
    assert len(pcm.content) == 2 * 24000
    mulaw = await post({"text": "m" * 50, "format": "mulaw"}, api_key)
    assert mulaw["Content-Type"] == "audio/basic" and mulaw["X-Sample-Rate"] == "8000"
    assert ulaw2lin(mulaw.content).size == 4000


async def test_tts_h3_rest_audio_equals_the_websocket_frames(
    embedded_worker: WorkerRuntime, api_key: str, open_stream: Opener
) -> None:
    request = {
        "text": "Same audio either way. " * 5,
        "format": "pcm",
        "sample_rate": 16000,
    }
    rest = await post(request, api_key)
    stream = await open_stream()
    await stream.send(request)
    await stream.closed()
    assert rest.content == stream.log.audio("pcm")


async def test_tts_h1_x_request_id_and_ws_only_fields(
    embedded_worker: WorkerRuntime, api_key: str
) -> None:
    response = await post(
        {"text": TEXT, "keep_alive": 5, "request_id": "bad id"}, api_key
    )
    assert response.status_code == 200
    assert len(response["X-Request-Id"]) == 36  # a server UUID4
    bad = await post({"text": TEXT}, api_key, {"X-Request-Id": "has space"})
    assert bad["X-Request-Id"] != "has space"


@pytest.mark.parametrize(
    ("headers", "status", "message"),
    [
        ({}, 401, "API key required"),
        ({"Authorization": "Bearer vk_test_" + "B" * 38}, 401, "Invalid API key"),
    ],
)
async def test_tts_h1_h4_authentication(
    embedded_worker: WorkerRuntime,
    api_key: str,
    headers: dict,
    status: int,
    message: str,
) -> None:
    response = await post({"text": TEXT}, headers=headers)
    assert response.status_code == status
    error = response.json()["error"]
    assert (error["code"], error["message"]) == ("AUTH_FAILED", message)
    assert len(error["request_id"]) == 36


async def test_tts_h1_key_sources_and_origin(
    embedded_worker: WorkerRuntime, api_key: str
) -> None:
    assert (
        await post({"text": TEXT}, headers={"X-API-Key": api_key})
    ).status_code == 200
    response = await post({"text": TEXT}, path=f"/v1/tts?api_key={api_key}")
    assert response.status_code == 200
    refused = await post({"text": TEXT}, api_key, {"Origin": "https://evil.example"})
    assert (
        refused.status_code == 403 and refused.json()["error"]["code"] == "AUTH_FAILED"
    )


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ("{not json", 400, "INVALID_JSON"),
        ("[1, 2]", 400, "VALIDATION_ERROR"),
        ({"text": ""}, 400, "VALIDATION_ERROR"),
        ({"text": "hi", "speaker": "nobody"}, 400, "VALIDATION_ERROR"),
        ({"text": "hi", "format": "flac"}, 400, "VALIDATION_ERROR"),
        ({"text": "a" * 1_100_000}, 413, "VALIDATION_ERROR"),
        ({"text": "a" * 3_000_000}, 413, "VALIDATION_ERROR"),
    ],
)
async def test_tts_h4_client_errors(
    embedded_worker: WorkerRuntime, api_key: str, body: Any, status: int, code: str
) -> None:
    response = await post(body, api_key)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


async def test_tts_h4_no_worker_is_503_with_retry_after(api_key: str) -> None:
    response = await post({"text": TEXT}, api_key)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "MODEL_NOT_LOADED"
    assert response["Retry-After"] == "1"


async def test_tts_h4_overloaded_is_503_with_retry_after_ms(
    slow_fake: WorkerRuntime, api_key: str, open_stream: Opener, settings: Any
) -> None:
    settings.TTS_ADMISSION_WAIT_MS = 200
    slow_fake.jobs.slots["tts"] = 1
    busy = await open_stream()
    await busy.send({"text": "b" * 2000})
    await busy.event("header")
    response = await post({"text": TEXT}, api_key)
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "STREAMING_OVERLOADED" and error["retry_after_ms"] == 1000
    assert response["Retry-After"] == "1"
    await busy.send({"event": "cancel"})
    await busy.event("complete")


async def test_tts_h4_synthesis_past_the_rest_timeout_is_504(
    slow_fake: WorkerRuntime, api_key: str, settings: Any
) -> None:
    settings.TTS_REST_TIMEOUT_S = 0.3
    response = await post({"text": "t" * 3000}, api_key)
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "TIMEOUT"
    await asyncio.sleep(0.1)
    assert slow_fake.jobs.busy("tts") == 0


async def test_tts_h5_client_disconnect_cancels_the_job(
    slow_fake: WorkerRuntime, api_key: str
) -> None:
    body = json.dumps({"text": "h" * 3000}).encode()
    headers = {"Content-Type": "application/json", **auth(api_key)}
    comm = http("POST", "/v1/tts", body, headers)
    await comm.send_input({"type": "http.request", "body": body})
    deadline = time.monotonic() + 2
    while not slow_fake.jobs.busy("tts"):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    await comm.send_input({"type": "http.disconnect"})
    started = time.monotonic()
    while slow_fake.jobs.busy("tts"):
        assert time.monotonic() - started < 0.5, "the job outlived its client"
        await asyncio.sleep(0.01)


def submission(text: str) -> TtsSubmit:
    """A one-segment job's first message; its link names the job, channel and deadline."""
    segment = {"seq": 0, "text": text, "char_start": 0, "char_end": len(text)}
    return TtsSubmit(
        job_id="", reply_channel="", deadline=0.0, voice="tone", segments=[segment]
    )


async def test_tts_z2_a_cancelled_rest_job_stops_the_worker_within_200_ms(
    slow_fake: WorkerRuntime,
) -> None:
    job = ChannelJob(get_channel_layer())
    task = asyncio.create_task(
        job.run(submission("h" * 3000), timeout_s=30, rate=16000)
    )
    await asyncio.sleep(0.15)
    assert slow_fake.jobs.busy("tts") == 1
    started = time.monotonic()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    while slow_fake.jobs.busy("tts"):
        await asyncio.sleep(0.005)
    assert time.monotonic() - started < 0.2


async def test_tts_q4_a_rest_job_cancelled_while_admitted_is_withdrawn(
    embedded_worker: WorkerRuntime,
) -> None:
    job = ChannelJob(get_channel_layer())
    task = asyncio.create_task(
        job.run(submission("w" * 3000), timeout_s=30, rate=16000)
    )
    await asyncio.sleep(0)  # submitted, acceptance not yet read
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0.05)
    assert embedded_worker.jobs.busy("tts") == 0


async def test_tts_q3_rest_job_with_no_worker_is_model_not_loaded() -> None:
    job = ChannelJob(get_channel_layer())
    with pytest.raises(JobError) as info:
        await job.run(submission("x"), timeout_s=5, rate=16000)
    assert info.value.code == "MODEL_NOT_LOADED"


async def test_tts_h6_speakers_without_a_worker_is_not_ready(api_key: str) -> None:
    response = await request("GET", "/v1/tts/speakers", headers=auth(api_key))
    assert response.status_code == 200
    body = response.json()
    assert body["ready"] is False and body["engine"] == "fake"
    assert body["speakers"][0]["id"] == "tone" and body["speakers"][0]["default"]
    unauthenticated = await request("GET", "/v1/tts/speakers")
    assert unauthenticated.status_code == 401


async def test_tts_h6_h7_speakers_ready_and_every_listed_name_is_accepted(
    embedded_worker: WorkerRuntime, api_key: str
) -> None:
    await get_liveness().publish(embedded_worker.status())
    body = (await request("GET", "/v1/tts/speakers", headers=auth(api_key))).json()
    assert body["ready"] is True
    names = [s["id"] for s in body["speakers"]] + [
        a for s in body["speakers"] for a in s["aliases"]
    ]
    assert body["speakers"][0]["aliases"] == sorted(body["speakers"][0]["aliases"])
    for name in names:
        response = await post({"text": "ok", "speaker": name, "format": "pcm"}, api_key)
        assert response.status_code == 200 and response["X-Speaker"] == "tone"


async def test_tts_h3_large_bodies_are_spooled_and_streamed(
    embedded_worker: WorkerRuntime, api_key: str
) -> None:
    response = await post(
        {"text": "l" * 3000, "format": "pcm", "sample_rate": 48000}, api_key
    )
    assert response.status_code == 200
    assert int(response["Content-Length"]) == len(response.content) == 2 * 48000 * 30
    assert np.frombuffer(response.content, "<i2").any()
