"""The OpenAI dialect over the ASGI app, fake ASR engine, real Silero VAD and Piper speech (§17)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest

from asr.worker.engines.fake import FakeAsr, fake_transcript
from tests.asr.conftest import (
    MARKER,
    Clip,
    Realtime,
    b64,
    connect,
    silence,
    update,
)
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)

DELTA = "conversation.item.input_audio_transcription.delta"
COMPLETED = "conversation.item.input_audio_transcription.completed"
FAILED = "conversation.item.input_audio_transcription.failed"
COMMIT = {"type": "input_audio_buffer.commit"}


def fake(runtime: WorkerRuntime) -> FakeAsr:
    engine = runtime.engines["asr"].engine
    assert isinstance(engine, FakeAsr)
    return engine


def speech_bounds(clip: Clip) -> tuple[float, float]:
    """Onset and offset (s) of the clip's speech by a 10 ms energy gate."""
    x = clip.pcm16k.astype(np.float64).reshape(-1)[: len(clip.pcm16k) // 160 * 160]
    energy = np.sqrt((x.reshape(-1, 160) ** 2).mean(axis=1))
    loud = np.nonzero(energy > 300)[0]
    return loud[0] * 0.01, (loud[-1] + 1) * 0.01


async def commit_and_finish(rt: Realtime, **extra: Any) -> list[dict[str, Any]]:
    await rt.send({**COMMIT, **extra})
    return await rt.until("conversation.item.done")


# Session configuration.


async def test_asr_t_c1_created_defaults_and_query_model(
    embedded_worker: object, api_key: str
) -> None:
    rt = await connect(key=api_key, created=False)
    created = await rt.recv()
    assert created["type"] == "session.created"
    assert created["id"] == created["session"]["id"] and created["id"].startswith(
        "sess_"
    )
    assert isinstance(created["created"], int)
    session = created["session"]
    assert session["object"] == "realtime.transcription_session"
    assert session["audio"]["input"] == {
        "format": {"type": "audio/pcm", "rate": 24000},
        "noise_reduction": None,
        "transcription": {"model": "whisper-tiny.en", "language": None, "prompt": None},
        "turn_detection": None,
    }
    assert session["include"] is None
    assert session["expires_at"] - created["created"] in (1800, 1801)
    await rt.comm.disconnect()
    rt = await connect(
        "/v1/realtime?model=whisper-1&intent=transcription", key=api_key, created=False
    )
    assert (await rt.recv())["session"]["audio"]["input"]["transcription"][
        "model"
    ] == "whisper-1"
    await rt.comm.disconnect()
    rt = await connect("/v1/realtime?model=unknown&foo=bar", key=api_key, created=False)
    first = await rt.recv()
    assert (
        first["session"]["audio"]["input"]["transcription"]["model"]
        == "whisper-tiny.en"
    )
    assert await rt.quiet()
    await rt.comm.disconnect()


async def test_asr_t_c2_partial_updates_and_identical_resend(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    full = update(
        format={"type": "audio/pcm", "rate": 24000},
        transcription={
            "model": "gpt-4o-transcribe",
            "language": "en",
            "prompt": "Django",
        },
        turn_detection={"type": "server_vad"},
    )
    await rt.send(full)
    first = (await rt.recv())["session"]["audio"]["input"]
    await rt.send(update(transcription={"language": None}))
    second = (await rt.recv())["session"]["audio"]["input"]
    assert second["transcription"] == {**first["transcription"], "language": None}
    assert second["turn_detection"] == first["turn_detection"]
    await rt.send(update(turn_detection=None))
    assert (await rt.recv())["session"]["audio"]["input"]["turn_detection"] is None
    await rt.append(clips["clip"].bytes_at(24000)[:48000])
    await rt.send(full)
    again = await rt.recv()
    assert again["type"] == "session.updated"
    assert again["session"]["audio"]["input"] == first
    assert await rt.quiet()
    await rt.comm.disconnect()


async def test_asr_t_c3_semantic_vad_rejects_the_whole_update(
    embedded_worker: object, api_key: str
) -> None:
    rt = await connect(key=api_key)
    await rt.send(
        {
            **update(
                transcription={"language": "en"},
                turn_detection={"type": "semantic_vad"},
            ),
            "event_id": "evt_7",
        }
    )
    error = await rt.recv()
    assert error["type"] == "error"
    assert error["error"]["code"] == "not_supported"
    assert error["error"]["param"] == "session.audio.input.turn_detection.type"
    assert error["error"]["event_id"] == "evt_7"
    assert await rt.quiet()
    await rt.send({"type": "session.update", "session": {"type": "transcription"}})
    after = await rt.recv()
    assert after["session"]["audio"]["input"]["transcription"]["language"] is None
    await rt.comm.disconnect()


async def test_asr_t_c4_bad_events_get_one_error_each_and_the_session_goes_on(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    await rt.send("{not json")
    error = await rt.recv()
    assert error["error"]["code"] == "invalid_payload"
    assert error["error"]["event_id"] is None and error["error"]["param"] is None
    await rt.send({"type": "made.up.event", "event_id": "client_event_1"})
    error = await rt.recv()
    assert (error["error"]["code"], error["error"]["event_id"]) == (
        "unknown_event",
        "client_event_1",
    )
    assert error["error"]["message"] == "Unknown event type: 'made.up.event'."
    await rt.send({"type": "session.update", "event_id": "client_event_2"})
    error = await rt.recv()
    assert (error["error"]["code"], error["error"]["param"]) == (
        "invalid_value",
        "session",
    )
    assert await rt.quiet()
    await rt.append(clips["clip"].bytes_at(24000))
    events = await commit_and_finish(rt)
    assert events[-2]["type"] == COMPLETED and events[-2]["transcript"]
    await rt.comm.disconnect()


@pytest.mark.parametrize("rate", [16000, 24000, 48000])
async def test_asr_t_c5_every_pcm_rate_transcribes(
    embedded_worker: object, api_key: str, clips: dict[str, Clip], rate: int
) -> None:
    rt = await connect(key=api_key)
    await rt.send(update(format={"type": "audio/pcm", "rate": rate}))
    updated = await rt.recv()
    assert updated["session"]["audio"]["input"]["format"]["rate"] == rate
    pcm = silence(0.5, rate) + clips["clip"].bytes_at(rate) + silence(0.5, rate)
    await rt.append(pcm, chunk_bytes=rate // 5)
    events = await commit_and_finish(rt)
    completed = next(e for e in events if e["type"] == COMPLETED)
    assert completed["transcript"] == fake_transcript(3)
    assert completed["usage"]["seconds"] == pytest.approx(
        len(pcm) / 2 / rate, abs=0.001
    )
    await rt.comm.disconnect()


async def test_asr_t_c5_bad_rate_unknown_field_and_idle_timeout_ms(
    embedded_worker: object, api_key: str
) -> None:
    rt = await connect(key=api_key)
    cases = [
        (
            update(format={"type": "audio/pcm", "rate": 44100}),
            "invalid_value",
            "session.audio.input.format.rate",
        ),
        (update(foo=1), "unknown_parameter", "session.audio.input.foo"),
        (
            update(turn_detection={"type": "server_vad", "idle_timeout_ms": 1000}),
            "not_supported",
            "session.audio.input.turn_detection.idle_timeout_ms",
        ),
    ]
    for event, code, param in cases:
        await rt.send(event)
        error = await rt.recv()
        assert (error["error"]["code"], error["error"]["param"]) == (code, param)
    await rt.comm.disconnect()


async def test_asr_t_c5_rate_change_mid_item_keeps_the_audio(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    pcm24, pcm48 = clips["clip"].bytes_at(24000), clips["clip2"].bytes_at(48000)
    await rt.append(pcm24)
    await rt.send(update(format={"type": "audio/pcm", "rate": 48000}))
    assert (await rt.recv())["type"] == "session.updated"
    await rt.append(pcm48, chunk_bytes=19200)
    events = await commit_and_finish(rt)
    completed = next(e for e in events if e["type"] == COMPLETED)
    seconds = len(pcm24) / 48000 + len(pcm48) / 96000
    assert completed["usage"]["seconds"] == pytest.approx(seconds, abs=0.002)
    assert (
        len(completed["transcript"].split()) == int(seconds)
        or len(completed["transcript"].split()) == int(seconds) - 1
    )
    await rt.comm.disconnect()


@pytest.mark.parametrize("kind", ["audio/pcmu", "audio/pcma"])
async def test_asr_t_c6_g711_audio_is_decoded_at_8k(
    embedded_worker: object, api_key: str, clips: dict[str, Clip], kind: str
) -> None:
    rt = await connect(key=api_key)
    await rt.send(update(format={"type": kind}))
    fmt = (await rt.recv())["session"]["audio"]["input"]["format"]
    assert fmt == {"type": kind}
    data = clips["clip"].g711(kind)
    await rt.append(data, chunk_bytes=1600)
    events = await commit_and_finish(rt)
    completed = next(e for e in events if e["type"] == COMPLETED)
    assert completed["usage"]["seconds"] == pytest.approx(len(data) / 8000, abs=0.001)
    assert completed["transcript"]  # speech was detected and forwarded
    await rt.comm.disconnect()


async def test_asr_t_c7_aliases_are_echoed_and_unknown_models_refused(
    embedded_worker: object, api_key: str
) -> None:
    rt = await connect(key=api_key)
    for alias in (
        "whisper-1",
        "gpt-4o-transcribe",
        "gpt-4o-mini-transcribe",
        "gpt-realtime-whisper",
        "whisper-tiny.en",
    ):
        await rt.send(update(transcription={"model": alias}))
        echoed = await rt.recv()
        assert echoed["session"]["audio"]["input"]["transcription"]["model"] == alias
    await rt.send(update(transcription={"model": "foo"}))
    error = await rt.recv()
    assert error["error"]["code"] == "not_supported"
    assert error["error"]["param"] == "session.audio.input.transcription.model"
    await rt.comm.disconnect()


async def test_asr_t_c8_noise_reduction_beta_update_and_prompt(
    embedded_worker: WorkerRuntime, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    await rt.send(
        update(
            noise_reduction={"type": "near_field"},
            transcription={"prompt": "Django, Channels, vLLM", "language": "en"},
        )
    )
    updated = await rt.recv()
    assert updated["session"]["audio"]["input"]["noise_reduction"] == {
        "type": "near_field"
    }
    await rt.append(clips["clip"].bytes_at(24000))
    await commit_and_finish(rt)
    final_call = fake(embedded_worker).calls[-1]
    assert final_call.prompt == "Django, Channels, vLLM" and final_call.language == "en"
    rt.beta = True
    await rt.send(
        {
            "type": "transcription_session.update",
            "event_id": "evt_b1",
            "session": {
                "input_audio_format": "pcm16",
                "input_audio_transcription": {"model": "whisper-1", "language": "en"},
                "turn_detection": {"type": "server_vad"},
                "input_audio_noise_reduction": {"type": "far_field"},
            },
        }
    )
    beta = await rt.recv()
    assert beta["type"] == "transcription_session.updated"
    assert beta["session"]["input_audio_format"] == "pcm16"
    assert beta["session"]["turn_detection"] == {
        "type": "server_vad",
        "threshold": 0.5,
        "prefix_padding_ms": 300,
        "silence_duration_ms": 500,
    }
    assert beta["session"]["modalities"] == ["text"]
    await rt.comm.disconnect()


# Audio input.


async def test_asr_t_b1_bad_audio_is_reported_and_not_fatal(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    await rt.send(
        {"type": "input_audio_buffer.append", "audio": "not base64!", "event_id": "a1"}
    )
    error = await rt.recv()
    assert (
        error["error"]["code"],
        error["error"]["param"],
        error["error"]["event_id"],
    ) == (
        "invalid_audio",
        "audio",
        "a1",
    )
    await rt.send({"type": "input_audio_buffer.append", "audio": b64(b"\x01\x02\x03")})
    assert (await rt.recv())["error"]["code"] == "invalid_audio_format"
    await rt.send({"type": "input_audio_buffer.append", "audio": 5})
    error = await rt.recv()
    assert (error["error"]["code"], error["error"]["param"]) == (
        "invalid_value",
        "audio",
    )
    await rt.send({"type": "input_audio_buffer.append", "audio": ""})
    assert await rt.quiet()
    await rt.comm.send_to(bytes_data=b"\x00\x00")
    error = await rt.recv()
    assert error["error"]["code"] == "invalid_payload"
    assert error["error"]["message"].startswith("Binary frames are not supported")
    await rt.append(clips["clip"].bytes_at(24000))
    events = await commit_and_finish(rt)
    assert any(e["type"] == COMPLETED for e in events)
    await rt.comm.disconnect()


async def test_asr_t_b2_61_s_without_commit_overflows(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    await rt.send(update(format={"type": "audio/pcm", "rate": 16000}))
    await rt.recv()
    speech = clips["clip"].bytes_at(16000)
    pcm = speech * (int(61 / clips["clip"].seconds) + 2)
    await rt.append(pcm, chunk_bytes=32000)
    events, close = await rt.closed()
    errors = [e for e in events if e["type"] == "error"]
    assert len(errors) == 1 and events[-1] is errors[0]
    assert errors[0]["error"]["code"] == "buffer_overflow"
    assert errors[0]["error"]["type"] == "server_error"
    assert close["code"] == 1009
    assert not any(e["type"] == "session.updated" for e in events)


async def test_asr_lm1_message_too_large_closes_1009(
    embedded_worker: object, api_key: str, settings: Any
) -> None:
    settings.ASR_MAX_MESSAGE_BYTES = 1000
    rt = await connect(key=api_key)
    await rt.send({"type": "input_audio_buffer.append", "audio": "A" * 1200})
    events, close = await rt.closed()
    assert [e["error"]["code"] for e in events] == ["message_too_large"]
    assert close["code"] == 1009


# Items.


async def test_asr_t_i1_three_commits_chain_and_usage(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    previous, seen = None, []
    for n in range(3):
        pcm = clips["clip"].bytes_at(24000) + silence(0.1 * n)
        await rt.append(pcm)
        events = await commit_and_finish(rt)
        kinds = [e["type"] for e in events]
        assert kinds[:2] == ["input_audio_buffer.committed", "conversation.item.added"]
        assert kinds[-2:] == [COMPLETED, "conversation.item.done"]
        assert set(kinds[2:-2]) <= {DELTA}
        item_id = events[0]["item_id"]
        assert all(
            e.get("item_id", e.get("item", {}).get("id")) == item_id for e in events
        )
        assert (
            events[0]["previous_item_id"] == previous == events[1]["previous_item_id"]
        )
        assert events[1]["item"]["content"][0]["transcript"] is None
        completed = events[-2]
        assert events[-1]["item"]["content"][0]["transcript"] == completed["transcript"]
        deltas = [e["delta"] for e in events if e["type"] == DELTA]
        assert "".join(deltas) == completed["transcript"]
        assert completed["usage"]["seconds"] == pytest.approx(
            len(pcm) / 48000, abs=0.001
        )
        seen.append(item_id)
        previous = item_id
    assert len(set(seen)) == 3
    await rt.comm.disconnect()


async def test_asr_t_i3_deltas_before_commit_use_the_reserved_id(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    pcm = b"".join(clips[k].bytes_at(24000) for k in ("clip", "clip2", "clip"))
    for i in range(0, len(pcm), 4800):
        await rt.send(
            {"type": "input_audio_buffer.append", "audio": b64(pcm[i : i + 4800])}
        )
        await asyncio.sleep(0.01)
    events = await commit_and_finish(rt)
    early = []
    for e in rt.frames[1:]:
        if e["type"] == "input_audio_buffer.committed":
            break
        early.append(e)
    assert early and all(e["type"] == DELTA for e in early)
    committed = next(e for e in events if e["type"] == "input_audio_buffer.committed")
    assert {e["item_id"] for e in early} == {committed["item_id"]}
    deltas = [e["delta"] for e in rt.frames if e["type"] == DELTA]
    text = ""
    for d in deltas:
        assert d and (text + d).startswith(text)
        text += d
    assert text == events[-2]["transcript"]
    assert not deltas[0].startswith(" ")
    await rt.comm.disconnect()


async def test_asr_t_i4_empty_commits_are_rejected_and_harmless(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    await rt.send({**COMMIT, "event_id": "evt_1"})
    error = await rt.recv()
    assert error["error"] == {
        "type": "invalid_request_error",
        "code": "input_audio_buffer_commit_empty",
        "message": "Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, but buffer only has 0.00ms of audio.",
        "param": None,
        "event_id": "evt_1",
    }
    await rt.append(silence(0.04))
    await rt.send({**COMMIT, "event_id": "evt_3"})
    error = await rt.recv()
    assert error["error"]["message"].endswith("but buffer only has 40.00ms of audio.")
    assert error["error"]["event_id"] == "evt_3"
    await rt.append(clips["clip"].bytes_at(24000))
    events = await commit_and_finish(rt)
    assert events[-2]["usage"]["seconds"] == pytest.approx(
        0.04 + clips["clip"].seconds, abs=0.002
    )
    await rt.comm.disconnect()


async def test_asr_t_i5_clear_drops_the_item(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    await rt.send({"type": "input_audio_buffer.clear", "event_id": "c0"})
    assert (await rt.recv())["type"] == "input_audio_buffer.cleared"
    await rt.append(clips["clip"].bytes_at(24000))
    first = await commit_and_finish(rt)
    first_id = first[0]["item_id"]
    long = b"".join(clips[k].bytes_at(24000) for k in ("clip", "clip2"))
    await rt.append(long)
    await rt.send({"type": "input_audio_buffer.clear"})
    before_clear = await rt.until("input_audio_buffer.cleared")
    cleared_ids = {e["item_id"] for e in before_clear if e["type"] == DELTA}
    await rt.append(clips["clip2"].bytes_at(24000))
    second = await commit_and_finish(rt)
    assert second[0]["item_id"] not in cleared_ids | {first_id}
    assert second[0]["previous_item_id"] == first_id
    after = rt.frames[rt.frames.index(before_clear[-1]) :]
    assert not any(e.get("item_id") in cleared_ids for e in after)
    await rt.comm.disconnect()


async def test_asr_t_i6_final_failure_fails_the_item_only(
    embedded_worker: WorkerRuntime, api_key: str, clips: dict[str, Clip], settings: Any
) -> None:
    settings.ASR_PRECOMMIT_DELTAS = False
    rt = await connect(key=api_key)
    engine = fake(embedded_worker)
    engine.failures, engine.failure_text = 2, f"boom {MARKER} /srv/model.bin"
    await rt.append(clips["clip"].bytes_at(24000))
    events = await commit_and_finish(rt)
    kinds = [e["type"] for e in events]
    assert COMPLETED not in kinds and kinds[-2] == FAILED
    assert events[-2]["error"] == {
        "type": "server_error",
        "code": "inference_failed",
        "message": "Transcription failed",
        "param": None,
    }
    assert events[-1]["item"]["content"][0]["transcript"] is None
    await rt.append(clips["clip2"].bytes_at(24000))
    events = await commit_and_finish(rt)
    assert events[-2]["type"] == COMPLETED and events[-2]["transcript"]
    await rt.comm.disconnect()


async def test_asr_t_i7_t_r7_chunk_failure_closes_1011_without_details(
    embedded_worker: WorkerRuntime, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    engine = fake(embedded_worker)
    engine.failures, engine.failure_text = 1, f"CUDA error {MARKER} at worker-7"
    await rt.append(clips["clip"].bytes_at(24000) + clips["clip2"].bytes_at(24000))
    events, close = await rt.closed()
    assert events[-1]["error"]["code"] == "inference_failed"
    assert events[-1]["error"]["message"] == "Transcription failed"
    assert close["code"] == 1011


async def test_asr_t_i8_logprobs_on_every_delta(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    await rt.send(
        {
            "type": "session.update",
            "session": {
                "type": "transcription",
                "include": ["item.input_audio_transcription.logprobs"],
            },
        }
    )
    assert (await rt.recv())["session"]["include"] == [
        "item.input_audio_transcription.logprobs"
    ]
    await rt.append(b"".join(clips[k].bytes_at(24000) for k in ("clip", "clip2")))
    events = await commit_and_finish(rt)
    deltas = [e for e in rt.frames if e["type"] == DELTA]
    assert deltas
    for delta in deltas:
        assert "".join(p["token"] for p in delta["logprobs"]) == delta["delta"]
        for entry in delta["logprobs"]:
            assert entry["logprob"] <= 0
            assert entry["bytes"] == list(entry["token"].encode())
    completed = events[-2]
    assert "".join(p["token"] for p in completed["logprobs"]) == completed["transcript"]
    await rt.comm.disconnect()


async def test_asr_t_i9_items_finish_in_commit_order(
    embedded_worker: WorkerRuntime, api_key: str, clips: dict[str, Clip], settings: Any
) -> None:
    settings.ASR_PRECOMMIT_DELTAS = False
    rt = await connect(key=api_key)
    engine = fake(embedded_worker)
    engine.delay_s = 0.2
    await rt.append(b"".join(clips[k].bytes_at(24000) for k in ("clip", "clip2")))
    await rt.send(COMMIT)
    await rt.append(silence(0.3))
    await rt.send(COMMIT)  # speechless: ready at once, but must wait
    while sum(e["type"] == "conversation.item.done" for e in rt.frames) < 2:
        await rt.recv()
    items = [
        e["item_id"] for e in rt.frames if e["type"] == "input_audio_buffer.committed"
    ]
    transcription = [
        e.get("item_id") or e["item"]["id"]
        for e in rt.frames
        if e["type"] in (DELTA, COMPLETED, FAILED, "conversation.item.done")
    ]
    assert transcription == sorted(transcription, key=items.index)
    await rt.comm.disconnect()


# Server VAD.


async def test_asr_t_d1_server_vad_commits_a_turn(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    await rt.send(update(turn_detection={"type": "server_vad"}))
    await rt.recv()
    clip = clips["clip"]
    onset, offset = speech_bounds(clip)
    await rt.append(silence(1.0) + clip.bytes_at(24000) + silence(1.0))
    events = await rt.until("conversation.item.done")
    kinds = [e["type"] for e in events if e["type"] != DELTA]
    assert kinds == [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.added",
        COMPLETED,
        "conversation.item.done",
    ]
    started, stopped = (
        events[0],
        next(e for e in events if e["type"].endswith("stopped")),
    )
    assert abs(started["audio_start_ms"] - (1000 + onset * 1000 - 300)) <= 150
    assert abs(stopped["audio_end_ms"] - (1000 + offset * 1000 + 500)) <= 150
    item_id = started["item_id"]
    assert stopped["item_id"] == item_id
    assert all(e.get("item_id", e.get("item", {}).get("id")) == item_id for e in events)
    completed = next(e for e in events if e["type"] == COMPLETED)
    assert completed["transcript"]
    assert completed["usage"]["seconds"] == pytest.approx(
        stopped["audio_end_ms"] / 1000, abs=0.002
    )
    await rt.comm.disconnect()


async def test_asr_t_d2_two_turns_and_a_clear_keep_the_clock(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    await rt.send(update(turn_detection={"type": "server_vad"}))
    await rt.recv()
    await rt.append(silence(0.5) + clips["clip"].bytes_at(24000) + silence(1.0))
    first = await rt.until("conversation.item.done")
    await rt.send({"type": "input_audio_buffer.clear"})
    await rt.until("input_audio_buffer.cleared")
    await rt.append(silence(0.5) + clips["clip2"].bytes_at(24000) + silence(1.0))
    second = await rt.until("conversation.item.done")
    s1 = next(e for e in first if e["type"].endswith("speech_started"))
    s2 = next(e for e in second if e["type"].endswith("speech_started"))
    clock = 1500 + clips["clip"].seconds * 1000
    assert s2["audio_start_ms"] > clock  # the clock did not reset at commit or clear
    assert s1["item_id"] != s2["item_id"]
    commits = [e for e in rt.frames if e["type"] == "input_audio_buffer.committed"]
    assert len(commits) == 2 and commits[1]["previous_item_id"] == commits[0]["item_id"]
    await rt.comm.disconnect()


@pytest.mark.parametrize("vad", [True, False])
async def test_asr_t_d3_five_minutes_of_silence_is_quiet(
    embedded_worker: object, api_key: str, vad: bool
) -> None:
    rt = await connect(key=api_key)
    if vad:
        await rt.send(update(turn_detection={"type": "server_vad"}))
        await rt.recv()
    frame = json.dumps(
        {"type": "input_audio_buffer.append", "audio": b64(silence(0.02))}
    )
    for _ in range(15000):
        await rt.comm.send_to(text_data=frame)
    await rt.send({"type": "input_audio_buffer.clear"})
    assert (await rt.recv(timeout=60))["type"] == "input_audio_buffer.cleared"
    await rt.comm.disconnect()


async def test_asr_t_d4_manual_commits_in_server_vad_mode(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    await rt.send(update(turn_detection={"type": "server_vad"}))
    await rt.recv()
    await rt.append(silence(0.04))
    await rt.send(COMMIT)
    assert (await rt.recv())["error"]["code"] == "input_audio_buffer_commit_empty"
    await rt.append(silence(0.5) + clips["clip"].bytes_at(24000)[:48000])
    await rt.send(COMMIT)
    events = await rt.until("conversation.item.done")
    kinds = [e["type"] for e in events]
    assert "input_audio_buffer.speech_started" in kinds
    assert "input_audio_buffer.speech_stopped" not in kinds
    await rt.comm.disconnect()


# Ordering and termination.


async def test_asr_t_r2_events_follow_client_order(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key)
    sends = [
        {
            "type": "input_audio_buffer.append",
            "audio": b64(clips["clip"].bytes_at(24000)),
        },
        COMMIT,
        {"type": "input_audio_buffer.append", "audio": b64(silence(0.05))},
        {"type": "input_audio_buffer.clear"},
        {**COMMIT, "event_id": "empty"},
        update(transcription={"language": "en"}),
    ]
    for event in sends:
        await rt.send(event)
    await rt.until("session.updated")
    while not any(e["type"] == "conversation.item.done" for e in rt.frames):
        await rt.recv()
    sync = [
        e["type"]
        for e in rt.frames[1:]
        if e["type"] not in (DELTA, COMPLETED, "conversation.item.done")
    ]
    assert sync == [
        "input_audio_buffer.committed",
        "conversation.item.added",
        "input_audio_buffer.cleared",
        "error",
        "session.updated",
    ]
    await rt.comm.disconnect()


async def test_asr_t_r3_idle_timeout_and_keepalive(
    embedded_worker: object, api_key: str, settings: Any
) -> None:
    settings.ASR_IDLE_TIMEOUT_S = 1.0
    rt = await connect(key=api_key)
    for _ in range(3):
        await asyncio.sleep(0.6)
        await rt.send({"type": "input_audio_buffer.append", "audio": ""})
    assert await rt.quiet(0.1)
    events, close = await rt.closed(timeout=3)
    assert [e["error"]["code"] for e in events] == ["idle_timeout"]
    assert close["code"] == 1000


async def test_asr_t_r3_max_session_expires(
    embedded_worker: object, api_key: str, settings: Any
) -> None:
    settings.ASR_MAX_SESSION_S = 2
    rt = await connect(key=api_key, created=False)
    created = await rt.recv()
    assert created["session"]["expires_at"] - created["created"] == 2
    events, close = await rt.closed(timeout=5)
    assert [e["error"]["code"] for e in events] == ["session_expired"]
    assert close["code"] == 1000


async def test_asr_t_p1_pipecat_style_flow(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect("/v1/realtime?intent=transcription", key=api_key)
    await rt.send(
        {
            "type": "session.update",
            "session": {
                "type": "transcription",
                "audio": {
                    "input": {
                        "format": {"type": "audio/pcm", "rate": 24000},
                        "transcription": {
                            "model": "gpt-realtime-whisper",
                            "language": "en",
                        },
                        "turn_detection": None,
                        "noise_reduction": {"type": "near_field"},
                    }
                },
            },
        }
    )
    assert (await rt.recv())["type"] == "session.updated"

    async def stream(pcm: bytes) -> None:
        for i in range(0, len(pcm), 960):
            await rt.comm.send_to(
                text_data=json.dumps(
                    {
                        "type": "input_audio_buffer.append",
                        "audio": b64(pcm[i : i + 960]),
                    }
                )
            )

    await stream(silence(2.0) + clips["clip"].bytes_at(24000))
    await rt.send(COMMIT)
    await stream(silence(70.0) + clips["clip2"].bytes_at(24000))
    await rt.send(COMMIT)
    while sum(e["type"] == "conversation.item.done" for e in rt.frames) < 2:
        await rt.recv(timeout=30)
    assert not any(e["type"] == "error" for e in rt.frames)
    transcripts = [e["transcript"] for e in rt.frames if e["type"] == COMPLETED]
    assert len(transcripts) == 2 and all(transcripts)
    await rt.comm.disconnect()
