"""The vLLM dialect and dialect detection (§4, §9), ported from vLLM's realtime tests."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from asr.worker.engines.fake import fake_transcript
from tests.asr.conftest import Clip, Realtime, b64, connect, silence

pytestmark = pytest.mark.django_db(transaction=True)

FINAL = {"type": "input_audio_buffer.commit", "final": True}
START = {"type": "input_audio_buffer.commit"}


async def vllm_session(key: str, path: str = "/v1/realtime", **update: Any) -> Realtime:
    rt = await connect(path, key=key)
    rt.vllm = True
    await rt.send({"type": "session.update", "model": "whisper-tiny.en", **update})
    updated = await rt.recv()
    assert updated == {"type": "session.updated", "model": "whisper-tiny.en"}
    return rt


async def stream_16k(rt: Realtime, pcm: bytes, pace: float = 0.0) -> None:
    for i in range(0, len(pcm), 3200):  # 0.1 s per append
        await rt.send(
            {"type": "input_audio_buffer.append", "audio": b64(pcm[i : i + 3200])}
        )
        if pace:
            await asyncio.sleep(pace)


async def test_asr_t_l1_vllm_flow_with_exact_keys(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await vllm_session(api_key)
    await rt.send(START)
    pcm = b"".join(clips[k].bytes_at(16000) for k in ("clip", "clip2"))
    await stream_16k(rt, pcm, pace=0.005)
    await rt.send(FINAL)
    events = await rt.until("transcription.done")
    deltas = [e["delta"] for e in events if e["type"] == "transcription.delta"]
    assert [e["type"] for e in events[: len(deltas)]] == ["transcription.delta"] * len(
        deltas
    )
    done = events[-1]
    assert done["text"] == "".join(deltas) and done["text"]
    assert all(e["logprobs"] is None for e in events[:-1])
    usage = done["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["completion_tokens"] > 0 and usage["prompt_tokens_details"] is None
    await rt.comm.disconnect()


async def test_asr_t_l2_vllm_logprobs_when_included(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await vllm_session(
        api_key, include=["item.input_audio_transcription.logprobs"]
    )
    await rt.send(START)
    await stream_16k(rt, clips["clip"].bytes_at(16000) + clips["clip2"].bytes_at(16000))
    await rt.send(FINAL)
    events = await rt.until("transcription.done")
    deltas = [e for e in events if e["type"] == "transcription.delta"]
    assert deltas
    for delta in deltas:
        assert "".join(p["token"] for p in delta["logprobs"]) == delta["delta"]
        assert all(
            p["logprob"] <= 0 and p["bytes"] == list(p["token"].encode())
            for p in delta["logprobs"]
        )
    await rt.comm.disconnect()


async def test_asr_t_l3_empty_final_commit_is_an_empty_done(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await vllm_session(api_key)
    await rt.send(START)
    await rt.send(FINAL)
    assert await rt.recv() == {
        "type": "transcription.done",
        "text": "",
        "usage": {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "total_tokens": 0,
            "prompt_tokens_details": None,
        },
    }
    await rt.comm.disconnect()
    rt = await vllm_session(api_key)
    await stream_16k(rt, clips["clip"].bytes_at(16000))
    await rt.send(FINAL)
    done = (await rt.until("transcription.done"))[-1]
    assert done["text"] == fake_transcript(2) or done["text"] == fake_transcript(3)
    await rt.comm.disconnect()


async def test_asr_t_l4_vllm_errors(embedded_worker: object, api_key: str) -> None:
    rt = await connect(key=api_key)
    rt.vllm = True
    await rt.send({"type": "session.update", "model": "nonexistent-model"})
    assert await rt.recv() == {
        "type": "error",
        "error": "The model `nonexistent-model` does not exist.",
        "code": "model_not_found",
    }
    await rt.send({"type": "session.update", "model": "whisper-1", "include": ["nope"]})
    error = await rt.recv()
    assert error["code"] == "invalid_event" and "include" in error["error"]
    await rt.send(START)
    assert (await rt.recv())["code"] == "model_not_validated"
    await rt.send(FINAL)
    assert (await rt.recv())["code"] == "model_not_validated"
    await rt.send("{oops")
    assert await rt.recv() == {
        "type": "error",
        "error": "Invalid JSON",
        "code": "invalid_json",
    }
    await rt.send({"type": "input_audio_buffer.clear"})
    assert await rt.recv() == {
        "type": "error",
        "error": "Unknown event type: input_audio_buffer.clear",
        "code": "unknown_event",
    }
    await rt.send({"type": "session.update"})
    assert (await rt.recv())["error"] == "Missing required field: model"
    await rt.comm.disconnect()


async def test_asr_t_l5_dialect_query_and_detection(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect("/v1/realtime?dialect=vllm", key=api_key, created=False)
    created = await rt.recv()
    assert created["session"]["audio"]["input"]["format"]["rate"] == 16000
    rt.vllm = True
    await stream_16k(
        rt, clips["clip"].bytes_at(16000)
    )  # appends before the update (VL-3)
    await rt.send({"type": "session.update", "model": "whisper-1"})
    assert (await rt.recv()) == {"type": "session.updated", "model": "whisper-1"}
    await rt.send(FINAL)
    assert (await rt.until("transcription.done"))[-1]["text"]
    await rt.comm.disconnect()

    rt = await connect("/v1/realtime?dialect=openai", key=api_key)
    await rt.send({"type": "session.update", "model": "whisper-1"})
    error = await rt.recv()
    assert (error["error"]["code"], error["error"]["param"]) == (
        "invalid_value",
        "session",
    )
    await rt.comm.disconnect()

    rt = await connect(key=api_key)
    await rt.send({"type": "input_audio_buffer.append", "audio": b64(silence(0.1))})
    await rt.send({"type": "session.update", "model": "whisper-1"})
    error = await rt.recv()
    assert (error["error"]["code"], error["error"]["param"]) == (
        "invalid_value",
        "session",
    )
    await rt.comm.disconnect()


async def test_asr_di4_non_signals_keep_openai_rules_until_a_signal(
    embedded_worker: object, api_key: str
) -> None:
    rt = await connect(key=api_key)
    await rt.send({"type": "session.update", "event_id": "x"})
    assert (await rt.recv())["error"]["code"] == "invalid_value"  # OpenAI shape
    await rt.send({"type": "input_audio_buffer.commit", "event_id": "c"})
    assert (await rt.recv())["error"]["code"] == "input_audio_buffer_commit_empty"
    await rt.send({"type": "session.update", "model": "whisper-1"})
    rt.vllm = True
    assert await rt.recv() == {"type": "session.updated", "model": "whisper-1"}
    await rt.comm.disconnect()


async def test_asr_vl8_vllm_final_failure_is_flat_and_not_fatal(
    embedded_worker: Any, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await vllm_session(api_key)
    engine = embedded_worker.engines["asr"].engine
    await stream_16k(rt, clips["clip"].bytes_at(16000))
    engine.failures = 2
    await rt.send(FINAL)
    assert await rt.recv() == {
        "type": "error",
        "error": "Transcription failed",
        "code": "inference_failed",
    }
    await stream_16k(rt, clips["clip2"].bytes_at(16000))
    await rt.send(FINAL)
    assert (await rt.until("transcription.done"))[-1]["text"]
    await rt.comm.disconnect()
