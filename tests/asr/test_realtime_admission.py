"""Connection, credentials, admission, worker capacity, cancellation and failover (§3, §11, §13)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from channels.layers import get_channel_layer

from asr.worker.engines.fake import FakeAsr
from tests.asr.conftest import Clip, Realtime, b64, connect, silence
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)

COMMIT = {"type": "input_audio_buffer.commit"}
COMPLETED = "conversation.item.input_audio_transcription.completed"


async def denied(rt: Realtime) -> tuple[dict[str, Any], dict[str, Any]]:
    events, close = await rt.closed()
    assert len(events) == 1 and events[0]["type"] == "error", events
    return events[0]["error"], close


@pytest.mark.parametrize("source", ["bearer", "x-api-key", "subprotocol", "query"])
async def test_asr_t_a1_every_key_source_is_accepted(
    embedded_worker: object, api_key: str, source: str
) -> None:
    path, headers, subprotocols = "/v1/realtime", [], None
    if source == "bearer":
        headers = [(b"authorization", f"Bearer {api_key}".encode())]
    elif source == "x-api-key":
        headers = [(b"x-api-key", api_key.encode())]
    elif source == "subprotocol":
        subprotocols = ["realtime", f"openai-insecure-api-key.{api_key}"]
    else:
        path += f"?api_key={api_key}"
    rt = await connect(path, headers=headers, subprotocols=subprotocols, created=False)
    rt.secrets = (api_key,)
    assert (await rt.recv())["type"] == "session.created"
    await rt.comm.disconnect()


@pytest.mark.parametrize("case", ["wrong", "missing", "two-keys", "basic"])
async def test_asr_t_a1_bad_credentials_are_one_error_and_1008(
    embedded_worker: object, api_key: str, case: str
) -> None:
    headers = {
        "wrong": [
            (
                b"authorization",
                b"Bearer vk_test_" + b"A" * 32,
            )  # key-shaped, bad checksum
        ],
        "missing": [],
        "two-keys": [
            (b"authorization", f"Bearer {api_key}".encode()),
            (b"x-api-key", b"vk_test_other"),
        ],
        "basic": [(b"authorization", b"Basic dXNlcjpwYXNz")],
    }[case]
    rt = await connect(headers=headers, created=False)
    rt.secrets = (api_key,)
    error, close = await denied(rt)
    assert error == {
        "type": "invalid_request_error",
        "code": "invalid_api_key",
        "message": "Incorrect API key provided.",
        "param": None,
        "event_id": None,
    }
    assert close["code"] == 1008


async def test_asr_t_s2_subprotocol_selection_never_echoes_the_key(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    from channels.testing import WebsocketCommunicator

    from veena_site.asgi import application

    async def selected(offered: list[str]) -> str | None:
        comm = WebsocketCommunicator(application, "/v1/realtime", subprotocols=offered)
        connected, subprotocol = await comm.connect()
        assert connected
        await comm.disconnect()
        return subprotocol

    key_protocol = f"openai-insecure-api-key.{api_key}"
    assert await selected(["realtime", key_protocol]) == "realtime"
    assert (
        await selected([key_protocol, "openai-beta.realtime-v1", "realtime"])
        == "realtime"
    )
    assert (
        await selected([key_protocol, "openai-beta.realtime-v1"])
        == "openai-beta.realtime-v1"
    )
    assert await selected([key_protocol]) is None
    rt = await connect(
        subprotocols=["realtime", "openai-beta.realtime-v1", key_protocol], beta=True
    )
    rt.secrets = (api_key,)
    await rt.append(clips["clip"].bytes_at(24000))
    await rt.send(COMMIT)
    events = await rt.until(COMPLETED)
    kinds = [e["type"] for e in events]
    assert (
        "conversation.item.created" in kinds and "conversation.item.added" not in kinds
    )
    assert await rt.quiet()  # no conversation.item.done for beta clients
    await rt.comm.disconnect()


async def test_asr_cn6_openai_beta_header_marks_a_beta_client(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(
        key=api_key, headers=[(b"openai-beta", b"realtime=v1")], beta=True
    )
    await rt.append(clips["clip"].bytes_at(24000))
    await rt.send(COMMIT)
    events = await rt.until(COMPLETED)
    assert events[1]["type"] == "conversation.item.created"
    await rt.comm.disconnect()


async def test_asr_t_a4_no_worker_is_engine_unavailable(
    api_key: str, settings: Any
) -> None:
    started = time.monotonic()
    rt = await connect(key=api_key, created=False)
    error, close = await denied(rt)
    assert (error["type"], error["code"]) == ("server_error", "engine_unavailable")
    assert close["code"] == 1011
    assert time.monotonic() - started < settings.ASR_WORKER_ANSWER_MS / 1000 + 1


async def test_asr_t_a3_worker_capacity_is_1013_with_a_retry_hint(
    embedded_worker: WorkerRuntime, api_key: str, settings: Any
) -> None:
    embedded_worker.jobs.slots["asr"] = 1
    first = await connect(key=api_key)
    started = time.monotonic()
    second = await connect(key=api_key, created=False)
    error, close = await denied(second)
    waited = time.monotonic() - started
    assert (error["type"], error["code"]) == (
        "rate_limit_exceeded",
        "too_many_sessions",
    )
    assert isinstance(error["retry_after_ms"], int) and error["retry_after_ms"] >= 1
    assert "Retry after" in error["message"]
    assert close["code"] == 1013
    assert settings.ASR_ADMISSION_WAIT_MS / 1000 * 0.8 <= waited <= 3
    await first.comm.disconnect()
    started = time.monotonic()
    third = await connect(key=api_key)
    assert time.monotonic() - started < 1
    await third.comm.disconnect()


async def test_asr_t_a3_account_concurrency_is_1008(
    embedded_worker: object, api_key: str
) -> None:
    from channels.db import database_sync_to_async

    from accounts.models.plans import Plan

    await database_sync_to_async(Plan.objects.update)(max_concurrent_streams=1)
    from accounts.auth import principal_cache

    principal_cache.clear()
    first = await connect(key=api_key)
    second = await connect(key=api_key, created=False)
    error, close = await denied(second)
    assert (error["code"], close["code"]) == ("too_many_sessions", 1008)
    assert error["retry_after_ms"] >= 1
    await first.comm.disconnect()


async def test_asr_t_a2_query_key_never_reaches_frames_or_logs(
    embedded_worker: object, api_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    rt = await connect(f"/v1/realtime?api_key={api_key}")
    rt.secrets = (api_key,)
    await rt.send("{broken")
    await rt.recv()
    await rt.comm.disconnect()
    assert all(api_key not in r.getMessage() for r in caplog.records)


async def test_asr_t_r1_disconnect_mid_decode_frees_the_slot(
    embedded_worker: WorkerRuntime, api_key: str, clips: dict[str, Clip]
) -> None:
    embedded_worker.jobs.slots["asr"] = 1
    engine = embedded_worker.engines["asr"].engine
    assert isinstance(engine, FakeAsr)
    engine.delay_s = 3.0
    rt = await connect(key=api_key)
    await rt.append(clips["clip"].bytes_at(24000))
    await rt.send(COMMIT)
    await rt.until("conversation.item.added")
    await asyncio.sleep(0.1)  # the final decode is running
    assert embedded_worker.jobs.busy("asr") == 1
    await rt.comm.disconnect()
    started = time.monotonic()
    while embedded_worker.jobs.busy("asr"):
        await asyncio.sleep(0.01)
    assert time.monotonic() - started < 1
    await embedded_worker.jobs.wait_idle()
    assert time.monotonic() - started < 1
    engine.delay_s = 0
    again = await connect(key=api_key)  # admitted at the limit
    await again.comm.disconnect()


async def test_asr_t_r4_worker_loss_replays_the_item(
    embedded_worker: WorkerRuntime, api_key: str, clips: dict[str, Clip], settings: Any
) -> None:
    settings.ASR_WORKER_STALL_S = 0.6
    layer = get_channel_layer()
    sent: list[dict] = []
    original = layer.send

    async def recording(channel: str, message: dict) -> None:
        if message["type"] == "asr.job.audio":
            sent.append(message)
        await original(channel, message)

    layer.send = recording
    rt = await connect(key=api_key)
    pcm = b"".join(clips[k].bytes_at(24000) for k in ("clip", "clip2", "clip"))
    half = len(pcm) // 2 // 4800 * 4800
    await rt.append(pcm[:half], chunk_bytes=4800)
    await asyncio.sleep(0.3)
    job_id = next(iter(embedded_worker.jobs.running))
    embedded_worker.jobs.cancel(job_id)  # the worker dies silently
    await rt.append(pcm[half:], chunk_bytes=4800)
    await asyncio.sleep(1.5)
    await rt.send(COMMIT)
    events = await rt.until("conversation.item.done", timeout=10)
    deltas = [e["delta"] for e in rt.frames if e["type"].endswith(".delta")]
    completed = next(e for e in events if e["type"] == COMPLETED)
    assert "".join(deltas) == completed["transcript"] and completed["transcript"]
    jobs = {m["job_id"] for m in sent}
    assert len(jobs) == 2
    first_job = sent[0]["job_id"]
    replayed = sum(len(m["pcm"]) for m in sent if m["job_id"] != first_job)
    assert replayed <= 2 * 16000 * (len(pcm) / 48000 + 0.5)  # at most the item
    await rt.comm.disconnect()


async def test_asr_t_r5_channel_bytes_are_linear_in_audio(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    layer = get_channel_layer()
    audio_messages: list[dict] = []
    commits: list[dict] = []
    original = layer.send

    async def recording(channel: str, message: dict) -> None:
        if message["type"] == "asr.job.audio":
            audio_messages.append(message)
        elif message["type"] == "asr.job.commit":
            commits.append(message)
        await original(channel, message)

    layer.send = recording
    rt = await connect(key=api_key)
    speech = b"".join(clips[k].bytes_at(24000) for k in ("clip", "clip2"))
    pcm = (speech * 20)[: 60 * 48000]
    since_commit = 0
    for i in range(0, len(pcm), 960):  # 20 ms appends
        await rt.comm.send_to(
            text_data=f'{{"type":"input_audio_buffer.append","audio":"{b64(pcm[i : i + 960])}"}}'
        )
        since_commit += 960
        if since_commit >= 5 * 48000:
            await rt.send(COMMIT)
            since_commit = 0
    await rt.send(COMMIT)
    while (
        sum(e["type"] == "conversation.item.done" for e in rt.frames) < len(commits)
        or not commits
    ):
        await rt.recv(timeout=20)
    retained = sum(c["total_samples"] for c in commits)
    assert sum(len(m["pcm"]) for m in audio_messages) == 2 * retained
    assert max(len(m["pcm"]) for m in audio_messages) <= 2 * 8000
    assert len(audio_messages) <= 12 * 60
    await rt.comm.disconnect()


async def test_asr_t_b2_ar3_events_before_session_created_wait_for_it(
    embedded_worker: object, api_key: str, clips: dict[str, Clip]
) -> None:
    rt = await connect(key=api_key, created=False)
    await rt.send({"type": "session.update", "session": {"type": "transcription"}})
    await rt.append(silence(0.2))
    first = await rt.recv()
    assert first["type"] == "session.created"
    assert (await rt.recv())["type"] == "session.updated"
    await rt.comm.disconnect()


async def test_asr_lm5_key_revoked_mid_session_is_invalid_api_key_1008(
    embedded_worker: object, api_key: str
) -> None:
    from channels.db import database_sync_to_async

    from accounts.models.api_keys import ApiKey
    from accounts.services.api_keys import api_key_revoke

    rt = await connect(key=api_key)

    def revoke() -> None:
        for key in ApiKey.objects.all():
            api_key_revoke(api_key=key, actor=None, reason="test", actor_label="tests")

    await database_sync_to_async(revoke)()
    events, close = await rt.closed(timeout=3)
    assert [e["error"]["code"] for e in events] == ["invalid_api_key"]
    assert events[0]["error"]["message"] == "Incorrect API key provided."
    assert close["code"] == 1008


async def test_asr_wk7_a_long_handler_is_not_a_lost_worker(
    embedded_worker: WorkerRuntime,
    api_key: str,
    clips: dict[str, Clip],
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
) -> None:
    """A 15 MiB append keeps the consumer busy for seconds; heartbeats queue meanwhile."""
    from asr.front_end import FrontEnd, Heard

    settings.ASR_WORKER_STALL_S = 1.0
    embedded_worker.jobs.slots["asr"] = 1
    append = FrontEnd.append

    def slow(self: FrontEnd, audio: bytes, samples: int) -> Heard:
        if len(audio) > 100_000:
            time.sleep(2.5)
        return append(self, audio, samples)

    monkeypatch.setattr(FrontEnd, "append", slow)
    layer = get_channel_layer()
    opens: list[dict] = []
    original = layer.send

    async def recording(channel: str, message: dict) -> None:
        if message["type"] == "asr.job.open":
            opens.append(message)
        await original(channel, message)

    layer.send = recording
    rt = await connect(key=api_key)
    await rt.append(silence(3), chunk_bytes=144_000)
    await rt.append(clips["clip"].bytes_at(24000))
    await rt.send(COMMIT)
    events = await rt.until("conversation.item.done")
    assert events[-2]["type"] == COMPLETED and events[-2]["transcript"]
    assert len(opens) == 1  # no second admission: the worker was never declared lost
    await rt.comm.disconnect()
