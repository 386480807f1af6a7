"""Real service, real engines: the unmodified openai SDK and a raw client against ``rungateway``.

The gateway runs as a child process (embedded topology, faster-whisper tiny.en, fresh DATA_DIR,
a key minted with ``create_api_key``); the speech is Piper's, resampled with soxr (realtime T-S1,
T-S2, T-C6). One in-process test checks that a disconnect mid-inference leaves no task (T-R1).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import websockets
from openai.types.realtime import RealtimeServerEvent as ServerEvent
from pydantic import TypeAdapter

from tests.asr.conftest import Clip, b64, silence
from tests.support.live_gateway import (
    Gateway,
    asr_gateway,
    assert_transcribed,
    check_flow,
    sdk_transcribe,
    server_vad_two_utterances,
)
from tests.wer import word_error_rate

RealtimeServerEvent = TypeAdapter(ServerEvent)

pytestmark = pytest.mark.slow

DELTA = "conversation.item.input_audio_transcription.delta"
COMPLETED = "conversation.item.input_audio_transcription.completed"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from asr_gateway(tmp_path_factory.mktemp("gateway"))


async def test_asr_t_s1_openai_sdk_transcribes_24k_speech(
    gateway: Gateway, clips: dict[str, Clip]
) -> None:
    text = clips["clip"].text + " " + clips["clip2"].text
    audio = (
        silence(0.3) + clips["clip"].bytes_at(24000) + clips["clip2"].bytes_at(24000)
    )
    kinds, events = await sdk_transcribe(
        gateway, audio, {"type": "audio/pcm", "rate": 24000}, chunk=4800
    )
    transcript = check_flow(kinds, events)
    assert_transcribed(text, transcript, "24 kHz pcm")


async def test_asr_t_c6_openai_sdk_transcribes_8k_pcmu(
    gateway: Gateway, clips: dict[str, Clip]
) -> None:
    text = clips["clip"].text + " " + clips["clip2"].text
    audio = clips["clip"].g711("audio/pcmu") + clips["clip2"].g711("audio/pcmu")
    kinds, events = await sdk_transcribe(
        gateway,
        audio,
        {"type": "audio/pcmu"},
        chunk=800,
        transcription={"transcript": "deltas"},  # issue 34: the deltas joined exactly
    )
    transcript = check_flow(kinds, events, joined=True)
    assert_transcribed(text, transcript, "8 kHz pcmu")


async def test_openai_sdk_with_logprobs_and_word_times(
    gateway: Gateway, clips: dict[str, Clip]
) -> None:
    """Issue 34: the SDK parses every event with ``include`` logprobs and word times set;
    the entries are the engine's tokens (≤ 0) covering each text, the words rise inside
    the item's audio."""
    audio = clips["clip2"].bytes_at(24000) + silence(0.6)
    kinds, events = await sdk_transcribe(
        gateway,
        audio,
        {"type": "audio/pcm", "rate": 24000},
        chunk=4800,
        pace_s=0.05,  # 2 × real time: deltas stream before the commit
        transcription={"timestamp_granularities": ["word"]},
        include=["item.input_audio_transcription.logprobs"],
    )
    transcript = check_flow(kinds, events)
    assert_transcribed(clips["clip2"].text, transcript, "logprobs")
    for event in events:
        RealtimeServerEvent.validate_python(event.model_dump(exclude_unset=True))
    timed = [e for e in events if e.type in (DELTA, COMPLETED)]
    for event in timed:
        text = event.delta if event.type == DELTA else event.transcript
        assert event.logprobs and "".join(p.token for p in event.logprobs) == text
        assert all(
            p.logprob <= 0 and p.bytes == list(p.token.encode()) for p in event.logprobs
        )
    completed = timed[-1]
    words = (completed.model_extra or {})["words"]
    starts = [w["start"] for w in words]
    assert starts == sorted(starts) and len(words) == len(transcript.split())
    assert all(0 <= w["start"] <= w["end"] <= completed.usage.seconds for w in words)


async def test_asr_t_s2_browser_subprotocols_get_realtime(gateway: Gateway) -> None:
    offered = ["realtime", f"openai-insecure-api-key.{gateway.key}"]
    async with websockets.connect(gateway.ws, subprotocols=offered) as ws:  # type: ignore[arg-type]
        assert ws.subprotocol == "realtime"
        assert ws.response is not None
        assert gateway.key not in str(ws.response.headers)
        created = json.loads(await ws.recv())
        assert created["type"] == "session.created"


async def test_asr_vd5_server_vad_splits_two_utterances(
    gateway: Gateway, clips: dict[str, Clip]
) -> None:
    await server_vad_two_utterances(gateway, clips)


async def test_asr_t_r1_disconnect_mid_inference_frees_the_only_slot(
    gateway: Gateway, clips: dict[str, Clip]
) -> None:
    headers = {"Authorization": f"Bearer {gateway.key}"}
    long = b"".join(clips[k].bytes_at(24000) for k in ("clip", "clip2", "numbers")) * 4
    ws = await websockets.connect(gateway.ws, additional_headers=headers)
    assert json.loads(await ws.recv())["type"] == "session.created"
    for i in range(0, len(long), 48000):
        await ws.send(
            json.dumps(
                {"type": "input_audio_buffer.append", "audio": b64(long[i : i + 48000])}
            )
        )
    await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
    while json.loads(await ws.recv())["type"] != "conversation.item.added":
        pass
    await ws.close()
    started = time.monotonic()
    async with websockets.connect(gateway.ws, additional_headers=headers) as again:
        first = json.loads(await again.recv())
    assert first["type"] == "session.created", first
    assert time.monotonic() - started < 1.5  # slot freed within 1 s (+ handshake)


@pytest.fixture
def whisper_worker(settings: Any, request: pytest.FixtureRequest) -> Any:
    """The embedded worker with the real faster-whisper engine."""
    settings.ASR_ENGINE = "faster_whisper"
    settings.TTS_ENGINE = "fake"
    return request.getfixturevalue("embedded_worker")


@pytest.mark.django_db(transaction=True)
async def test_asr_t_r1_in_process_cancel_leaves_no_task(
    whisper_worker: Any, api_key: str, clips: dict[str, Clip]
) -> None:
    from tests.asr.conftest import connect

    runtime = whisper_worker
    rt = await connect(key=api_key)
    long = b"".join(clips[k].bytes_at(24000) for k in ("clip", "clip2", "numbers")) * 3
    await rt.append(long, chunk_bytes=48000)
    await rt.send({"type": "input_audio_buffer.commit"})
    await rt.until("conversation.item.added", timeout=30)
    await asyncio.sleep(0.1)
    await rt.comm.disconnect()
    started = time.monotonic()
    while runtime.jobs.busy("asr"):
        await asyncio.sleep(0.01)
    await runtime.jobs.wait_idle()
    assert time.monotonic() - started < 1
    leftovers = [
        t
        for t in asyncio.all_tasks()
        if "asr.worker.jobs" in repr(t.get_coro()) or "AsrJob" in repr(t.get_coro())
    ]
    assert leftovers == []


async def test_asr_t_b3_15_mib_append_fits_and_16_mib_closes_1009(
    gateway: Gateway, clips: dict[str, Clip]
) -> None:
    headers = {"Authorization": f"Bearer {gateway.key}"}
    envelope = '{"type":"input_audio_buffer.append","audio":"%s"}'
    room = 15 * 1024 * 1024 - len(envelope)
    silence_ulaw = b"\xff" * (room // 4 * 3)  # G.711 µ-law zero, ~1470 s at 8 kHz
    big = envelope.replace("%s", b64(silence_ulaw))
    assert len(big) <= 15 * 1024 * 1024
    async with websockets.connect(gateway.ws, additional_headers=headers) as ws:
        assert json.loads(await ws.recv())["type"] == "session.created"
        await ws.send(
            json.dumps(
                {
                    "type": "session.update",
                    "session": {
                        "type": "transcription",
                        "audio": {"input": {"format": {"type": "audio/pcmu"}}},
                    },
                }
            )
        )
        assert json.loads(await ws.recv())["type"] == "session.updated"
        await ws.send(big)
        await ws.send(
            json.dumps(
                {
                    "type": "input_audio_buffer.append",
                    "audio": b64(clips["clip"].g711("audio/pcmu")),
                }
            )
        )
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        async with asyncio.timeout(60):
            events = []
            while not events or events[-1]["type"] != COMPLETED:
                events.append(json.loads(await ws.recv()))
        assert not [e for e in events if e["type"] == "error"]
        assert word_error_rate(clips["clip"].text, events[-1]["transcript"]) <= 0.15
        too_big = "x" * (16 * 1024 * 1024 + 1)
        # Daphne's own cap (16 MiB, AR-4) triggers first: it fails the connection with
        # 1009 while the client is still writing, so the client may see a reset instead.
        with pytest.raises((websockets.ConnectionClosed, ConnectionResetError)):
            await ws.send(too_big)
            while True:
                await ws.recv()
        rcvd = ws.close_code
        assert rcvd in (1009, 1006, None)


async def test_asr_lm7_close_codes_reach_the_client_through_daphne(
    gateway: Gateway,
) -> None:
    headers = {"Authorization": "Bearer vk_live_wrong"}
    async with websockets.connect(gateway.ws, additional_headers=headers) as ws:
        error = json.loads(await ws.recv())
        assert error["error"]["code"] == "invalid_api_key"
        with pytest.raises(websockets.ConnectionClosed):
            await ws.recv()
    assert ws.close_code == 1008
    assert ws.close_reason == "invalid_api_key"
