"""``/v1/tts/ws`` as a reference client sees it (docs/specs/tts-ws.md §1–§6, legacy mode).

The real ASGI application and the embedded worker with the fake engine (10 ms of 440 Hz tone per
character, 100 ms engine chunks).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import struct
import time
import uuid
import wave
from typing import Any

import numpy as np
import pytest

from accounts.exceptions import AdmissionDenied
from gateway.pcm import ulaw2lin
from tests.tts.conftest import Opener, Stream, bearer
from tts.audio import wav_stream_header
from tts.engine_info import ENGINE_INFO
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "Hello world. How are you today?"  # 31 chars → 310 ms of fake audio


async def run(stream: Stream, request: dict[str, Any]) -> Stream:
    await stream.send(request)
    await stream.closed()
    return stream


async def test_tts_l2_reference_client_transcript(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    """An unmodified reference client: one request, header, frames, progress, complete, 1000."""
    stream = await run(await open_stream(), {"text": "x" * 200, "speaker": "male1"})
    log = stream.log
    kinds = log.kinds()
    assert kinds[0] == "header" and kinds[-2:] == ["complete", "close"]
    assert kinds[1:11] == ["bytes"] * 10 and kinds[11] == "progress"
    header = log.events[0]
    assert {
        k: header[k] for k in ("event", "sample_rate", "format", "model_version")
    } == {
        "event": "header",
        "sample_rate": 16000,
        "format": "wav",
        "model_version": "fake/tone",
    }
    assert uuid.UUID(header["request_id"]).version == 4
    assert log.close_code == 1000


async def test_tts_w1_json_text_messages_and_binary_audio(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await run(await open_stream(), {"text": TEXT, "format": "pcm"})
    assert all(isinstance(e, dict) for e in stream.log.events)
    assert all(isinstance(f, bytes) for f in stream.log.frames)


@pytest.mark.parametrize("source", ["bearer", "x-api-key", "subprotocol", "query"])
async def test_tts_w2_every_credential_source_works(
    embedded_worker: WorkerRuntime, open_stream: Opener, api_key: str, source: str
) -> None:
    path, headers, protocols = "/v1/tts/ws", [], None
    if source == "bearer":
        headers = bearer(api_key)
    elif source == "x-api-key":
        headers = [(b"x-api-key", api_key.encode())]
    elif source == "subprotocol":
        protocols = ["veena-tts", f"veena-api-key.{api_key}"]
    else:
        path += f"?api_key={api_key}"
    stream = await open_stream(path, headers=headers, subprotocols=protocols)
    await run(stream, {"text": TEXT})
    assert stream.log.named("complete")


async def test_tts_w2_two_different_keys_are_auth_failed(
    embedded_worker: WorkerRuntime, open_stream: Opener, api_key: str
) -> None:
    other = api_key[:-4] + "AAAA"
    stream = await open_stream(f"/v1/tts/ws?api_key={other}", headers=bearer(api_key))
    event = await stream.event("error")
    assert event["error"]["code"] == "AUTH_FAILED" and await stream.closed() == 1008


async def test_tts_w3_browser_subprotocols(
    embedded_worker: WorkerRuntime, open_stream: Opener, api_key: str
) -> None:
    stream = await open_stream(
        headers=[], subprotocols=["veena-tts", f"veena-api-key.{api_key}"]
    )
    assert stream.subprotocol == "veena-tts"
    only_key = await open_stream(headers=[], subprotocols=[f"veena-api-key.{api_key}"])
    assert only_key.subprotocol is None


async def test_tts_w4_logs_hold_no_key_and_no_text(
    embedded_worker: WorkerRuntime,
    open_stream: Opener,
    api_key: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    secret_text = "Purple elephants whisper secrets."
    stream = await open_stream(f"/v1/tts/ws?api_key={api_key}", headers=[])
    await run(stream, {"text": secret_text})
    logged = "\n".join(
        r.getMessage() for r in caplog.records if r.levelno >= logging.INFO
    )
    assert api_key not in logged and "elephants" not in logged
    assert f"{len(secret_text)} chars" in logged


async def test_tts_w5_w7_missing_key_is_accepted_then_refused(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream(headers=[])
    event = await stream.event("error")
    assert event["error"]["code"] == "AUTH_FAILED"
    assert event["error"]["message"] == "API key required"
    assert event["error"]["fatal"] is True
    assert await stream.closed() == 1008
    assert stream.log.kinds() == ["error", "close"]


async def test_tts_w7_bad_key_has_the_single_message(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream(headers=bearer("vk_test_" + "A" * 38))
    event = await stream.event("error")
    assert event["error"] == {
        "code": "AUTH_FAILED",
        "message": "Invalid API key",
        "request_id": event["error"]["request_id"],
        "fatal": True,
    }


async def test_tts_w7_auth_off_serves_without_a_key(
    embedded_worker: WorkerRuntime, open_stream: Opener, settings: Any
) -> None:
    settings.TTS_AUTH_REQUIRED = False
    stream = await run(await open_stream(headers=[]), {"text": TEXT})
    assert stream.log.named("complete") and stream.log.close_code == 1000


@pytest.mark.parametrize(
    ("reason", "retry", "code", "close", "message"),
    [
        ("rate_limited", 1500, "RATE_LIMIT_EXCEEDED", 1008, "Rate limit exceeded. Retry after 2 seconds."),
        ("too_many_streams", None, "RATE_LIMIT_EXCEEDED", 1008, "Rate limit exceeded. Retry after 1 second."),
        ("quota_exceeded", None, "QUOTA_EXCEEDED", 1008, "Quota exceeded"),
        ("limits_unavailable", None, "STREAMING_OVERLOADED", 1013, "Streaming capacity exhausted. Retry shortly."),
        ("origin_not_allowed", None, "AUTH_FAILED", 1008, "Origin not allowed"),
    ],
)  # fmt: skip
async def test_tts_w6_x3_admission_denials_map_to_codes(
    open_stream: Opener,
    monkeypatch: pytest.MonkeyPatch,
    reason: str,
    retry: int | None,
    code: str,
    close: int,
    message: str,
) -> None:
    async def deny(*args: Any, **kwargs: Any) -> None:
        raise AdmissionDenied(reason, retry_after_ms=retry)  # type: ignore[arg-type]

    monkeypatch.setattr("tts.consumers.admit", deny)
    stream = await open_stream()
    event = await stream.event("error")
    assert (event["error"]["code"], event["error"]["message"]) == (code, message)
    if code in ("RATE_LIMIT_EXCEEDED", "STREAMING_OVERLOADED"):
        assert event["error"]["retry_after_ms"] == (retry or 1000)
    assert await stream.closed() == close
    assert "header" not in stream.log.kinds()


async def test_tts_w8_request_timeout_and_pings_do_not_extend_it(
    embedded_worker: WorkerRuntime, open_stream: Opener, settings: Any
) -> None:
    settings.TTS_REQUEST_TIMEOUT_S = 0.4
    stream = await open_stream()
    started = time.monotonic()
    for _ in range(3):
        await stream.send({"event": "ping"})
        assert await stream.next() == ("text", {"event": "pong"})
        await asyncio.sleep(0.1)
    event = await stream.event("error")
    assert 0.35 < time.monotonic() - started < 1.0
    assert event["error"]["code"] == "TIMEOUT"
    assert event["error"]["message"] == "No request received within 0.4 seconds"
    assert await stream.closed() == 1000


def test_tts_w8_default_message_is_the_reference_one(settings: Any) -> None:
    assert f"No request received within {settings.TTS_REQUEST_TIMEOUT_S:g} seconds" == (
        "No request received within 30 seconds"
    )


async def test_tts_w10_client_close_cancels_the_job(
    slow_fake: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": "c" * 3000})
    await stream.event("header")
    await stream.comm.disconnect()
    await asyncio.sleep(0.1)
    assert slow_fake.jobs.busy("tts") == 0


async def test_tts_w11_message_over_the_cap_is_1009(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send(json.dumps({"text": "a" * (1024 * 1024)}))
    event = await stream.event("error")
    assert event["error"]["code"] == "VALIDATION_ERROR"
    assert await stream.closed() == 1009


async def test_tts_w11_fifty_thousand_escaped_devanagari_chars_fit(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    text = ("नमस्तेदुनिया।" * 4000)[:50_000]
    message = json.dumps({"text": text})  # every character \u-escaped
    assert len(message) > 299_000
    stream = await open_stream()
    await stream.send(message)
    header = await stream.event("header")
    await stream.send({"event": "cancel"})
    complete = await stream.event("complete")
    assert complete["metrics"]["text_chars"] == 50_000 and header["event"] == "header"


@pytest.mark.parametrize(
    ("message", "code", "close"),
    [
        ("{oops", "INVALID_JSON", 1003),
        (b"\x00\x01", "INVALID_JSON", 1003),
        ("[1, 2]", "VALIDATION_ERROR", 1003),
        ('{"text": ""}', "VALIDATION_ERROR", 1003),
        ('{"text": "hi", "top_k": 5000}', "VALIDATION_ERROR", 1003),
        ('{"text": "hi", "format": "ogg"}', "VALIDATION_ERROR", 1003),
        ('{"text": "!!! ... ???"}', "VALIDATION_ERROR", 1003),
    ],
)
async def test_tts_r3_r1_r4_r7_bad_requests_fail_the_legacy_stream(
    embedded_worker: WorkerRuntime,
    open_stream: Opener,
    message: str | bytes,
    code: str,
    close: int,
) -> None:
    stream = await open_stream()
    await stream.send(message)
    event = await stream.event("error")
    assert event["error"]["code"] == code and event["error"]["fatal"] is True
    assert await stream.closed() == close
    assert embedded_worker.jobs.busy("tts") == 0


async def test_tts_r7_message(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": "*** 😀 ..."})
    event = await stream.event("error")
    assert event["error"]["message"] == "Text has no speakable content"


async def test_tts_r3_invalid_json_message_format(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send("{oops")
    event = await stream.event("error")
    assert event["error"]["message"].startswith("Invalid JSON: ")


async def test_tts_r1_speaker_is_resolved_last(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": "hi", "speaker": "nobody", "seed": -5})
    event = await stream.event("error")
    assert "seed" in event["error"]["message"]


async def test_tts_s4_x4_unknown_speaker_lists_valid_speakers(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": "hi", "speaker": "Nobody"})
    error = (await stream.event("error"))["error"]
    valid = ["agastya", "kavya", "maitri", "male1", "tone", "vinaya"]
    assert error["valid_speakers"] == valid
    assert (
        error["message"]
        == f"Unknown speaker 'Nobody'. Valid speakers: {', '.join(valid)}"
    )


async def test_tts_r5_speed_on_an_engine_without_speed_control(
    embedded_worker: WorkerRuntime, open_stream: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    no_speed = replace(ENGINE_INFO["fake"], supports_speed=False)
    monkeypatch.setitem(ENGINE_INFO, "fake", no_speed)
    stream = await open_stream()
    await stream.send({"text": "hi", "speed": 1.5})
    error = (await stream.event("error"))["error"]
    assert error["message"] == "speed is not supported by engine fake"


async def test_tts_r8_ignored_messages_while_active_and_not_active_controls(
    slow_fake: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"event": "cancel"})
    assert (await stream.event("warning"))["code"] == "NOT_ACTIVE"
    await stream.send({"event": "clear"})
    assert (await stream.event("warning"))["code"] == "NOT_ACTIVE"
    await stream.send({"text": "r" * 150})
    await stream.event("header")
    for junk in ("not json", b"\x01\x02", '{"event": "dance"}', "[1]"):
        await stream.send(junk)
        assert (await stream.event("warning"))["code"] == "IGNORED_MESSAGE"
    await stream.send({"event": "ping"})
    await stream.event("pong")
    complete = await stream.event("complete")
    assert complete["metrics"]["cancelled"] is False
    assert await stream.closed() == 1000


async def test_tts_r9_pong_within_a_second_during_synthesis(
    slow_fake: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": "p" * 2000})
    await stream.event("header")
    for _ in range(3):
        sent = time.monotonic()
        await stream.send({"event": "ping", "extra": 1})
        assert await stream.event("pong") == {"event": "pong"}
        assert time.monotonic() - sent < 1.0
    await stream.send({"event": "cancel"})
    await stream.event("complete")


async def test_tts_e1_e6_header_once_then_the_wav_header_frame(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await run(await open_stream(), {"text": TEXT, "sample_rate": 24000})
    log = stream.log
    assert len(log.named("header")) == 1
    header = log.named("header")[0]
    assert header == {
        "event": "header",
        "request_id": header["request_id"],
        "sample_rate": 24000,
        "format": "wav",
        "model_version": "fake/tone",
        "speaker": "tone",
        "engine": "fake",
        "encoding": "pcm_s16le",
        "channels": 1,
        "protocol_version": 2,
    }
    assert log.kinds().index("header") < log.kinds().index("bytes")
    assert log.frames[0] == wav_stream_header(24000)


@pytest.mark.parametrize("fmt", ["pcm", "mulaw"])
async def test_tts_e6_au1_pcm_and_mulaw_have_no_header_frame(
    embedded_worker: WorkerRuntime, open_stream: Opener, fmt: str
) -> None:
    stream = await run(await open_stream(), {"text": TEXT, "format": fmt})
    header = stream.log.named("header")[0]
    assert header["encoding"] == ("mulaw" if fmt == "mulaw" else "pcm_s16le")
    assert header["sample_rate"] == (8000 if fmt == "mulaw" else 16000)
    assert stream.log.frames[0][:4] != b"RIFF"
    audio = stream.log.audio(fmt)
    samples = ulaw2lin(audio) if fmt == "mulaw" else np.frombuffer(audio, "<i2")
    assert abs(samples.size - header["sample_rate"] * len(TEXT) // 100) <= 2


@pytest.mark.parametrize("rate", [8000, 16000, 22050, 24000, 44100, 48000])
async def test_tts_au4_e7_audio_is_at_the_announced_rate_in_whole_small_frames(
    embedded_worker: WorkerRuntime, open_stream: Opener, rate: int
) -> None:
    stream = await run(await open_stream(), {"text": "t" * 100, "sample_rate": rate})
    header = stream.log.named("header")[0]
    saved = stream.log.frames[0] + stream.log.audio()
    with wave.open(io.BytesIO(saved)) as wav:
        assert wav.getframerate() == header["sample_rate"] == rate
        pcm = np.frombuffer(wav.readframes(1 << 24), "<i2")
    assert abs(pcm.size - rate) <= 2  # 100 chars → 1 s at the requested rate
    spectrum = np.abs(np.fft.rfft(pcm.astype(float)))
    assert abs(np.argmax(spectrum) * rate / pcm.size - 440) < 5  # still a 440 Hz tone
    for frame in stream.log.frames[1:]:
        assert frame and len(frame) % 2 == 0 and len(frame) // 2 <= rate // 5


async def test_tts_e2_progress_cadence_and_fields(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await run(await open_stream(), {"text": "e" * 300})
    items, frames, progress = stream.log.items, 0, []
    sizes = 0
    for kind, value in items:
        if kind == "bytes":
            frames += 1
            sizes += len(value)
        elif kind == "text" and value["event"] == "progress":
            assert frames % 10 == 0  # right after the 10th, 20th … frame
            assert value["chunks_sent"] == frames and value["bytes_sent"] == sizes
            assert value["audio_ms"] == (sizes - 44) // 2 * 1000 // 16000
            assert isinstance(value["elapsed_ms"], int) and value["request_id"]
            progress.append(value)
    assert len(progress) == frames // 10 >= 2


async def test_tts_e3_e5_complete_metrics_match_what_was_sent(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await run(
        await open_stream(), {"text": "m" * 250, "request_id": "my-req.1"}
    )
    log = stream.log
    complete = log.named("complete")
    assert len(complete) == 1 and log.kinds()[-2] == "complete"
    metrics = complete[0]["metrics"]
    assert complete[0]["request_id"] == metrics["request_id"] == "my-req.1"
    assert metrics["chunks_sent"] == len(log.frames)
    assert metrics["total_bytes"] == sum(map(len, log.frames))
    samples = (metrics["total_bytes"] - 44) // 2
    assert metrics["audio_duration_seconds"] == round(samples / 16000, 2) == 2.5
    assert metrics["ttfb_ms"] >= 0 and metrics["cancelled"] is False
    assert metrics["rtf"] == pytest.approx(
        metrics["total_time_seconds"] / metrics["audio_duration_seconds"], abs=0.01
    )
    for name in ("queue_wait_ms", "text_chars", "segments", "sample_rate", "format"):
        assert name in metrics
    assert metrics["speaker"] == "tone" and metrics["engine"] == "fake"


async def test_tts_x1_connect_time_id_is_the_first_requests_id(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": "", "keep_alive": True})  # a non-fatal error first
    error = (await stream.event("error"))["error"]
    assert error["fatal"] is False
    await stream.send({"text": TEXT})
    header = await stream.event("header")
    assert header["request_id"] == error["request_id"]
    assert uuid.UUID(header["request_id"]).version == 4


async def test_tts_x2_worker_failure_is_a_fixed_message(
    embedded_worker: WorkerRuntime, open_stream: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = embedded_worker.engines["tts"].engine

    async def broken(req: Any) -> Any:
        raise RuntimeError("secret internal detail /etc/passwd")
        yield  # pragma: no cover

    monkeypatch.setattr(engine, "stream", broken)
    stream = await run(await open_stream(), {"text": TEXT})
    error = stream.log.named("error")[0]["error"]
    assert error["code"] == "INTERNAL_ERROR" and error["message"] == "Synthesis failed"
    assert "secret" not in json.dumps(stream.log.events)
    assert stream.log.close_code == 1011 and not stream.log.named("complete")


async def test_tts_x6_q3_no_worker_is_model_not_loaded(open_stream: Opener) -> None:
    stream = await open_stream()
    started = time.monotonic()
    await stream.send({"text": TEXT})
    error = (await stream.event("error"))["error"]
    assert error["code"] == "MODEL_NOT_LOADED"
    assert error["message"] == "TTS model not initialized"
    assert time.monotonic() - started < 1.5
    assert await stream.closed() == 1011


async def test_tts_x7_error_after_audio_started_sends_no_more_frames(
    slow_fake: WorkerRuntime, open_stream: Opener
) -> None:
    from channels.layers import get_channel_layer

    stream = await open_stream()
    await stream.send({"text": "g" * 1000})
    await stream.until(lambda item: item[0] == "bytes" and len(item[1]) > 44)
    job_id = next(iter(slow_fake.jobs.running))
    reply = slow_fake.jobs.running[job_id].reply_channel
    bogus = {"type": "gpu.tts.chunk", "job_id": job_id, "seq": 10_000, "segment_seq": 0}
    await get_channel_layer().send(reply, {**bogus, "data": b"\0\0", "samples": 1})
    await stream.event("error")
    assert await stream.closed() == 1011
    after = stream.log.kinds()[stream.log.kinds().index("error") :]
    assert after == ["error", "close"]
    await asyncio.sleep(0.1)
    assert slow_fake.jobs.busy("tts") == 0


async def test_tts_au2_saved_stream_reads_with_patched_sizes(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await run(await open_stream(), {"text": TEXT})
    total = stream.log.named("complete")[0]["metrics"]["total_bytes"]
    saved = bytearray(stream.log.frames[0] + stream.log.audio())
    struct.pack_into("<I", saved, 4, total - 8)
    struct.pack_into("<I", saved, 40, total - 44)
    with wave.open(io.BytesIO(bytes(saved))) as wav:
        assert wav.getnframes() == (total - 44) // 2
