"""Extensions of ``/v1/tts/ws`` (docs/specs/tts-ws.md §9): keep-alive, incremental text, cancel by
id, clear, timestamps and speed. Fake engine through the real application and worker.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.tts.conftest import Opener, Stream
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)


async def complete_of(stream: Stream) -> dict[str, Any]:
    return (await stream.event("complete"))["metrics"]


async def test_tts_k1_k3_several_requests_on_one_stream(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    ids = []
    for i, fmt in enumerate(["wav", "pcm", "wav"]):
        await stream.send(
            {"text": f"Request number {i}.", "keep_alive": True, "format": fmt}
        )
        header = await stream.event("header")
        metrics = await complete_of(stream)
        ids.append(header["request_id"])
        assert metrics["request_id"] == header["request_id"]
    assert len(set(ids)) == 3
    start = 0
    for kind_index, kind in enumerate(stream.log.kinds()):
        if kind == "header":
            start = kind_index
        if kind == "complete":  # each request counts its own frames (K3)
            frames = stream.log.kinds()[start:kind_index].count("bytes")
            assert stream.log.items[kind_index][1]["metrics"]["chunks_sent"] == frames
    assert await stream.quiet(0.2)  # still open
    await stream.send({"text": "Last one, legacy."})
    await complete_of(stream)
    assert await stream.closed() == 1000  # K1: the latest request decides


async def test_tts_k2_a_request_while_one_is_active_is_refused_non_fatally(
    slow_fake: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": "k" * 400, "keep_alive": True, "request_id": "first"})
    await stream.event("header")
    await stream.send({"text": "second", "request_id": "second"})
    error = (await stream.event("error"))["error"]
    assert error == {
        "code": "VALIDATION_ERROR",
        "message": "A request is already active",
        "request_id": "second",
        "fatal": False,
    }
    await stream.send({"event": "start", "request_id": "third"})
    assert (await stream.event("error"))["error"]["request_id"] == "third"
    metrics = await complete_of(stream)
    assert metrics["request_id"] == "first" and metrics["cancelled"] is False


async def test_tts_k3_a_reused_request_id_is_refused(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": "One.", "keep_alive": True, "request_id": "same"})
    await complete_of(stream)
    await stream.send({"text": "Two.", "keep_alive": True, "request_id": "same"})
    error = (await stream.event("error"))["error"]
    assert error["code"] == "VALIDATION_ERROR" and error["fatal"] is False


async def test_tts_x5_non_fatal_errors_keep_a_keep_alive_stream_open(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": "Fine.", "keep_alive": True})
    await complete_of(stream)
    await stream.send({"text": "Bad speaker.", "speaker": "zz", "keep_alive": True})
    assert (await stream.event("error"))["error"]["fatal"] is False
    await stream.send({"text": "Still here.", "keep_alive": True})
    assert (await complete_of(stream))["cancelled"] is False
    await stream.send("{broken json")  # INVALID_JSON is fatal even with keep_alive
    assert (await stream.event("error"))["error"]["fatal"] is True
    assert await stream.closed() == 1003


async def test_tts_k5_idle_keep_alive_stream_times_out(
    embedded_worker: WorkerRuntime, open_stream: Opener, settings: Any
) -> None:
    settings.WS_IDLE_TIMEOUT_SECONDS = 0.3
    stream = await open_stream()
    await stream.send({"text": "Hi there.", "keep_alive": True})
    await complete_of(stream)
    for _ in range(3):  # any message, ping included, restarts the timer
        await asyncio.sleep(0.2)
        await stream.send({"event": "ping"})
        await stream.event("pong")
    error = (await stream.event("error", timeout=2))["error"]
    assert error["code"] == "TIMEOUT"
    assert await stream.closed() == 1000


async def test_tts_c1_cancel_by_id(
    slow_fake: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": "c" * 2000, "keep_alive": True, "request_id": "r1"})
    await stream.event("header")
    await stream.send({"event": "cancel", "request_id": "other"})
    warning = await stream.event("warning")
    assert (warning["code"], warning["request_id"]) == ("NOT_ACTIVE", "other")
    await stream.send({"event": "cancel", "request_id": "r1"})
    metrics = await complete_of(stream)
    assert metrics["cancelled"] is True
    await stream.send({"event": "cancel", "request_id": "r1"})  # late cancel: harmless
    assert (await stream.event("warning"))["code"] == "NOT_ACTIVE"
    await stream.send({"text": "Next.", "keep_alive": True})
    assert (await complete_of(stream))["cancelled"] is False


async def test_tts_z1_cancel_completes_fast_with_no_frame_after_it(
    slow_fake: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": "z" * 3000})
    await stream.until(lambda item: item[0] == "bytes" and len(item[1]) > 44)
    loop = asyncio.get_running_loop()
    sent_at = loop.time()
    await stream.send({"event": "cancel"})
    await stream.event("complete")
    assert loop.time() - sent_at < 0.25
    log = stream.log
    metrics = log.named("complete")[0]["metrics"]
    assert metrics["cancelled"] is True
    assert metrics["chunks_sent"] == len(log.frames)  # metrics of audio actually sent
    assert await stream.closed() == 1000
    assert log.kinds()[-2:] == ["complete", "close"]
    await asyncio.sleep(0.25)
    assert slow_fake.jobs.busy("tts") == 0  # Z2: the worker stopped and freed the slot


async def test_tts_z1_cancel_before_header_gets_header_then_complete(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": "Never mind." * 30})
    await stream.send({"event": "cancel"})
    await stream.closed()
    kinds = [k for k in stream.log.kinds() if k != "bytes"]
    assert kinds == ["header", "complete", "close"]
    metrics = stream.log.named("complete")[0]["metrics"]
    assert metrics["cancelled"] is True and metrics["ttfb_ms"] == 0
    assert metrics["audio_duration_seconds"] == 0
    await asyncio.sleep(0.2)
    assert embedded_worker.jobs.busy("tts") == 0  # the withdrawn job was cancelled (Q4)


async def test_tts_i1_i4_i5_incremental_request_streams_text_in_order(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    start = {"event": "start", "request_id": "turn-1", "speaker": "kavya"}
    await stream.send(
        {**start, "format": "pcm", "sample_rate": 24000, "keep_alive": True}
    )
    header = await stream.event("header")
    assert (header["request_id"], header["format"], header["sample_rate"]) == (
        "turn-1",
        "pcm",
        24000,
    )
    await stream.send({"event": "text", "text": "Sure, I can help. Your order "})
    await stream.until(lambda item: item[0] == "bytes")  # audio before any flush (I3)
    await stream.send({"event": "text", "text": "ships tomorrow."})
    await stream.send({"event": "text", "text": ""})  # ignored
    await stream.send({"event": "flush"})
    flushed = await stream.event("flushed")
    assert flushed == {"event": "flushed", "request_id": "turn-1", "flush_id": 1}
    await stream.send({"event": "text", "text": "Anything else? "})
    await stream.send({"event": "flush", "flush_id": "f-2"})
    assert (await stream.event("flushed"))["flush_id"] == "f-2"
    await stream.send({"event": "end"})
    metrics = await complete_of(stream)
    text = "Sure, I can help. Your order ships tomorrow.Anything else? "
    assert metrics["text_chars"] == len(text)
    samples = sum(len(f) for f in stream.log.frames) // 2
    spoken = len("Sure, I can help.Your order ships tomorrow.Anything else?")
    assert abs(samples - 240 * spoken) <= 4  # the fake engine: 10 ms per spoken char
    await stream.send({"event": "text", "text": "late"})
    assert (await stream.event("warning"))["code"] == "IGNORED_MESSAGE"


async def test_tts_i3_buffer_delay_sends_text_without_a_sentence_end(
    embedded_worker: WorkerRuntime, open_stream: Opener, settings: Any
) -> None:
    settings.TTS_MAX_BUFFER_DELAY_MS = 150
    stream = await open_stream()
    await stream.send({"event": "start", "format": "pcm"})
    await stream.event("header")
    await stream.send({"event": "text", "text": "no sentence end here"})
    assert await stream.quiet(0.08)
    kind, _ = await stream.next(timeout=1)
    assert kind == "bytes"
    await stream.send({"event": "end"})
    await complete_of(stream)


async def test_tts_i2_too_much_incremental_text_ends_the_request(
    embedded_worker: WorkerRuntime, open_stream: Opener, settings: Any
) -> None:
    settings.TTS_MAX_TEXT_CHARS = 30
    stream = await open_stream()
    await stream.send({"event": "start", "keep_alive": True})
    await stream.event("header")
    await stream.send({"event": "text", "text": "a" * 20})
    await stream.send({"event": "text", "text": "b" * 20})
    error = (await stream.event("error"))["error"]
    assert (
        error["message"] == "Text too long: 40 chars (max 30)"
        and error["fatal"] is False
    )
    await asyncio.sleep(0.1)
    assert embedded_worker.jobs.busy("tts") == 0


async def test_tts_i6_idle_incremental_request_times_out(
    embedded_worker: WorkerRuntime, open_stream: Opener, settings: Any
) -> None:
    settings.TTS_INPUT_IDLE_S = 0.3
    stream = await open_stream()
    await stream.send({"event": "start", "format": "pcm"})
    await stream.event("header")
    await stream.send({"event": "text", "text": "Short. "})
    error = (await stream.event("error", timeout=3))["error"]
    assert error["code"] == "TIMEOUT"
    assert await stream.closed() == 1000
    await asyncio.sleep(0.05)
    assert embedded_worker.jobs.busy("tts") == 0


async def test_tts_i1_text_sent_before_the_header_is_kept(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"event": "start", "format": "pcm"})
    await stream.send({"event": "text", "text": "Early words arrive first. "})
    await stream.send({"event": "end"})
    metrics = await complete_of(stream)
    assert metrics["audio_duration_seconds"] == pytest.approx(0.25, abs=0.02)


async def test_tts_c2_clear_drops_unsent_audio_and_the_request_goes_on(
    slow_fake: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"event": "start", "format": "pcm", "timestamps": True})
    await stream.event("header")
    await stream.send({"event": "text", "text": "Long story. " * 40})
    await stream.until(lambda item: item[0] == "bytes")
    await stream.send({"event": "clear"})
    cleared = await stream.event("cleared")
    assert set(cleared) == {"event", "request_id"}
    at_clear = len(stream.log.frames)
    await stream.send({"event": "text", "text": "New text here. "})
    await stream.send({"event": "end"})
    metrics = await complete_of(stream)
    new_audio = sum(len(f) for f in stream.log.frames[at_clear:]) // 2
    assert abs(new_audio - 160 * 14) <= 4  # only "New text here." after cleared
    assert metrics["cancelled"] is False and metrics["chunks_sent"] == len(
        stream.log.frames
    )
    starts = stream.log.named("segment_start")
    assert (
        starts[-1]["text"] == " New text here. "
        or starts[-1]["text"].strip() == "New text here."
    )
    assert len(stream.log.named("segment_start")) == len(
        stream.log.named("segment_end")
    )


async def test_tts_c2_clear_outside_incremental_is_cancel(
    slow_fake: WorkerRuntime, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": "q" * 2000})
    await stream.event("header")
    await stream.send({"event": "clear"})
    assert (await complete_of(stream))["cancelled"] is True
    assert await stream.closed() == 1000


async def test_tts_ts1_ts2_sentence_timestamps(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    text = (
        "The first sentence is here. The second one follows it! And a third, at last?"
    )
    stream = await open_stream()
    await stream.send({"text": text, "timestamps": True, "chunking": True})
    metrics = await complete_of(stream)
    starts, ends = stream.log.named("segment_start"), stream.log.named("segment_end")
    assert [s["seq"] for s in starts] == [e["seq"] for e in ends] == [0, 1, 2]
    assert "".join(s["text"] for s in starts) == text
    for s in starts:
        assert text[s["char_start"] : s["char_end"]] == s["text"]
    for k, (s, e) in enumerate(zip(starts, ends, strict=True)):
        assert s["start_ms"] <= e["end_ms"]
        if k + 1 < len(starts):
            assert e["end_ms"] == starts[k + 1]["start_ms"]
    assert (
        abs(ends[-1]["end_ms"] - round(metrics["audio_duration_seconds"] * 1000)) <= 10
    )
    kinds = stream.log.kinds()
    for index, kind in enumerate(kinds):
        if kind == "segment_start":
            assert kinds[index + 1] == "bytes"  # immediately before its first frame
        if kind == "segment_end":
            assert kinds[index - 1] in ("bytes", "progress")
    progress = stream.log.named("progress")
    assert all("segment_seq" in p for p in progress)


async def test_tts_sp1_speed_scales_the_length_without_stretching(
    embedded_worker: WorkerRuntime, open_stream: Opener
) -> None:
    lengths = {}
    for speed in (0.5, 1.0, 2.0):
        stream = await open_stream()
        await stream.send({"text": "s" * 100, "speed": speed, "format": "pcm"})
        lengths[speed] = (await complete_of(stream))["audio_duration_seconds"]
    assert lengths == {0.5: 2.0, 1.0: 1.0, 2.0: 0.5}


async def test_tts_max_text_chars_setting_limits_a_whole_request_too(
    embedded_worker: WorkerRuntime, open_stream: Opener, settings: Any
) -> None:
    settings.TTS_MAX_TEXT_CHARS = 30
    stream = await open_stream()
    await stream.send({"event": "request", "text": "a" * 31})
    error = (await stream.event("error"))["error"]
    assert error["message"] == "Text too long: 31 chars (max 30)"
