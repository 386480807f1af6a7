"""Gateway ↔ worker round trips through the in-process layer (fake engines)."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import numpy as np
import pytest
from channels.testing import WebsocketCommunicator

from asr.worker.engines.fake import fake_transcript
from veena_site.asgi import application
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)


def bearer(raw: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", b"Bearer " + raw.encode())]


async def collect_tts(
    comm: WebsocketCommunicator,
) -> tuple[list[dict], list[bytes], dict]:
    """Read events and frames until the socket closes; return them and the close message."""
    events, frames = [], []
    while True:
        out = await comm.receive_output(timeout=10)
        if out["type"] == "websocket.close":
            return events, frames, out
        if out.get("bytes") is not None:
            frames.append(out["bytes"])
        else:
            events.append(json.loads(out["text"]))


async def test_tts_round_trip_in_process(embedded_worker: object, api_key: str) -> None:
    comm = WebsocketCommunicator(application, "/v1/tts/ws", headers=bearer(api_key))
    connected, _ = await comm.connect()
    assert connected
    text = "Hello world. This is the backbone."
    await comm.send_to(text_data=json.dumps({"text": text, "speaker": "male1"}))
    events, frames, close = await collect_tts(comm)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "header" and kinds[-1] == "complete"
    assert (
        events[0]["sample_rate"] == 16000 and events[0]["model_version"] == "fake/tone"
    )
    assert frames[0][:4] == b"RIFF" and len(frames[0]) == 44
    audio = b"".join(frames[1:])
    assert all(len(f) % 2 == 0 and f for f in frames[1:])
    # The fake engine makes 10 ms of tone per character; resampled 22050 → 16000.
    assert abs(len(audio) // 2 - 16 * 10 * len(text)) <= 2
    metrics = events[-1]["metrics"]
    assert metrics["chunks_sent"] == len(frames) and metrics["total_bytes"] == 44 + len(
        audio
    )
    assert metrics["cancelled"] is False
    assert close["code"] == 1000


async def test_tts_ping_before_request_and_cancel_midway(
    embedded_worker: object, api_key: str
) -> None:
    comm = WebsocketCommunicator(application, "/v1/tts/ws", headers=bearer(api_key))
    await comm.connect()
    await comm.send_to(text_data='{"event": "ping"}')
    assert json.loads(await comm.receive_from()) == {"event": "pong"}
    await comm.send_to(text_data=json.dumps({"text": "x" * 3000}))
    header = json.loads(await comm.receive_from())
    assert header["event"] == "header"
    await comm.send_to(text_data='{"event": "cancel"}')
    events, _, close = await collect_tts(comm)
    assert (
        events[-1]["event"] == "complete" and events[-1]["metrics"]["cancelled"] is True
    )
    assert close["code"] == 1000


async def test_tts_missing_key_is_auth_failed_after_accept(
    embedded_worker: object, transactional_db: None
) -> None:
    comm = WebsocketCommunicator(application, "/v1/tts/ws")
    connected, _ = await comm.connect()
    assert connected  # tts W5: accept first, never a 403 handshake
    event = json.loads(await comm.receive_from())
    assert event["error"]["code"] == "AUTH_FAILED"
    assert event["error"]["message"] == "API key required"
    assert (await comm.receive_output())["code"] == 1008


async def test_tts_no_worker_is_model_not_loaded(api_key: str) -> None:
    comm = WebsocketCommunicator(application, "/v1/tts/ws", headers=bearer(api_key))
    await comm.connect()
    started = time.monotonic()
    await comm.send_to(text_data=json.dumps({"text": "Nobody is listening."}))
    event = json.loads(await comm.receive_from(timeout=5))
    assert event["error"]["code"] == "MODEL_NOT_LOADED"
    assert (await comm.receive_output())["code"] == 1011
    assert time.monotonic() - started < 2.0


async def test_tts_every_slot_busy_is_streaming_overloaded(
    embedded_worker: WorkerRuntime, api_key: str, settings: object
) -> None:
    settings.FAKE_TTS_CHUNK_DELAY_S = 0.05
    embedded_worker.jobs.slots["tts"] = 1
    embedded_worker.engines["tts"].engine.chunk_delay_s = 0.05
    first = WebsocketCommunicator(application, "/v1/tts/ws", headers=bearer(api_key))
    await first.connect()
    await first.send_to(text_data=json.dumps({"text": "y" * 2000}))
    assert json.loads(await first.receive_from())["event"] == "header"
    second = WebsocketCommunicator(application, "/v1/tts/ws", headers=bearer(api_key))
    await second.connect()
    await second.send_to(text_data=json.dumps({"text": "Second stream."}))
    while True:
        out = json.loads(await second.receive_from(timeout=5))
        if out["event"] == "error":
            break
    assert out["error"]["code"] == "STREAMING_OVERLOADED"
    assert out["error"]["retry_after_ms"] >= 1
    assert (await second.receive_output())["code"] == 1013
    await first.disconnect()


def pcm_b64(seconds: float, rate: int = 24000) -> str:
    t = np.arange(int(seconds * rate)) / rate
    pcm = (0.3 * np.sin(2 * np.pi * 220 * t) * 32767).astype("<i2")
    return base64.b64encode(pcm.tobytes()).decode()


async def test_asr_round_trip_in_process(
    embedded_worker: object, api_key: str, settings: Any
) -> None:
    settings.ASR_TRIM_NONSPEECH = (
        False  # a sine is not speech to Silero (realtime §6.3)
    )
    comm = WebsocketCommunicator(
        application, "/v1/realtime", headers=bearer(api_key), subprotocols=["realtime"]
    )
    connected, subprotocol = await comm.connect()
    assert connected and subprotocol == "realtime"
    created = json.loads(await comm.receive_from())
    assert created["type"] == "session.created"
    for _ in range(5):
        await comm.send_to(
            text_data=json.dumps(
                {"type": "input_audio_buffer.append", "audio": pcm_b64(0.5)}
            )
        )
    await comm.send_to(text_data=json.dumps({"type": "input_audio_buffer.commit"}))
    events = []
    while (
        not events
        or events[-1]["type"] != "conversation.item.input_audio_transcription.completed"
    ):
        events.append(json.loads(await comm.receive_from(timeout=5)))
    assert events[0]["type"] == "input_audio_buffer.committed"
    deltas = [e["delta"] for e in events if e["type"].endswith(".delta")]
    assert "".join(deltas) == events[-1]["transcript"] == fake_transcript(2)
    await comm.disconnect()


async def test_asr_no_worker_is_engine_unavailable(api_key: str) -> None:
    comm = WebsocketCommunicator(application, "/v1/realtime", headers=bearer(api_key))
    await comm.connect()
    event = json.loads(await comm.receive_from(timeout=5))
    assert event["error"]["code"] == "engine_unavailable"
    assert (await comm.receive_output())["code"] == 1011


async def test_asr_bad_key_is_invalid_api_key_after_accept(
    embedded_worker: object, transactional_db: None
) -> None:
    comm = WebsocketCommunicator(
        application,
        "/v1/realtime",
        headers=bearer("vk_test_notakey"),
        subprotocols=["realtime"],
    )
    connected, subprotocol = await comm.connect()
    assert connected and subprotocol == "realtime"
    event = json.loads(await comm.receive_from())
    assert event["error"]["code"] == "invalid_api_key"
    assert event["error"]["message"] == "Incorrect API key provided."
    close = await comm.receive_output()
    assert close["code"] == 1008
