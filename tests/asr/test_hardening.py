"""Issue 9 on ``/v1/realtime`` (both dialects): malformed input is a protocol error, a bug in
any handler still releases everything once, and per-session memory and control traffic are
bounded. Each test names the issue's table row or item it proves."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator

from accounts.models.usage import UsageRecord
from asr.messages import AsrFinal
from asr.worker.engines.fake import FakeAsr
from tests.asr.conftest import Realtime, b64, bearer, silence
from tests.conftest import KeyMaker
from tests.support.leaks import (
    active_streams,
    encodable,
    error_logs,
    settled,
    started_records,
)
from tests.support.outages import (
    ENDED_BY_OUTAGE,
    assert_quiet,
    database_gone,
    ended_by,
    fail_own_channel_receive,
    redis_gone,
)
from tests.tts.conftest import lease_free
from veena_site.asgi import application
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)

COMMIT = {"type": "input_audio_buffer.commit"}


@dataclass
class Checked(Realtime):
    """A realtime client that also checks every frame is sendable as UTF-8."""

    def check(self, text: str) -> dict[str, Any]:
        assert encodable(text), f"unsendable text frame: {text!r:.200}"
        return super().check(text)


async def open_rt(
    raw: str, *, vllm: bool = False, created: bool = True, path: str = "/v1/realtime"
) -> Checked:
    if vllm:
        path += "?dialect=vllm"
    comm = WebsocketCommunicator(application, path, headers=bearer(raw))
    connected, _ = await comm.connect()
    assert connected
    rt = Checked(comm, secrets=(raw,), vllm=vllm)
    if created:
        assert (await rt.recv())["type"] == "session.created"
    return rt


async def released(runtime: WorkerRuntime, account_id: int, before: float) -> None:
    """Every resource of the session is back: gauge, worker slot, lease, record."""

    async def clean() -> bool:
        return (
            active_streams("asr") == before
            and runtime.jobs.busy("asr") == 0
            and await lease_free(account_id)
            and await started_records() == 0
        )

    assert await settled(clean), (
        active_streams("asr") - before,
        runtime.jobs.busy("asr"),
        await lease_free(account_id),
        await started_records(),
    )


def update(**input_: Any) -> dict[str, Any]:
    return {
        "type": "session.update",
        "session": {"type": "transcription", "audio": {"input": input_}},
    }


# The issue's table, and item 2's class.


async def test_i9_row_3_lone_surrogate_type_is_invalid_and_the_session_goes_on(
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    fast_vad_settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    api_key, raw = await keyed()
    before = active_streams("asr")
    rt = await open_rt(raw)
    await rt.append(silence(0.5))
    await rt.send('{"type":"\\udc80"}')
    error = (await rt.recv())["error"]
    assert error["code"] == "invalid_payload" and error["type"] == (
        "invalid_request_error"
    )
    await rt.send(update(format={"type": "audio/pcm", "rate": 16000}))
    assert (await rt.recv())["type"] == "session.updated"
    assert embedded_worker.jobs.busy("asr") == 1
    await rt.comm.disconnect()
    await released(embedded_worker, api_key.account_id, before)
    assert error_logs(caplog.records) == []


MALFORMED = {
    "deep-nesting": "[" * 5000,
    "deep-nesting-in-a-field": '{"type":"session.update","session":' + "[" * 5000,
    "lone-surrogate-type": '{"type":"\udc80"}',
    "lone-surrogate-event-id": '{"type":"made.up","event_id":"\\ud800"}',
    "lone-surrogate-prompt": json.dumps(
        update(transcription={"prompt": "\udc80"}), ensure_ascii=True
    ),
    "huge-integer-literal": '{"type":"session.update","x":' + "7" * 5000 + "}",
    "nan": '{"type":"session.update","session":{"type":"transcription",'
    '"audio":{"input":{"turn_detection":{"type":"server_vad","threshold":NaN}}}}}',
    "infinity": '{"type":"input_audio_buffer.commit","final":Infinity}',
    "overflowing-float": '{"type":"input_audio_buffer.append","audio":1e400}',
}


@pytest.mark.parametrize("vllm", [False, True], ids=["openai", "vllm"])
@pytest.mark.parametrize("text", MALFORMED.values(), ids=MALFORMED.keys())
async def test_i9_2_malformed_json_is_one_non_fatal_error(
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    text: str,
    vllm: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    api_key, raw = await keyed()
    before = active_streams("asr")
    rt = await open_rt(raw, vllm=vllm)
    await rt.send(text)
    event = await rt.recv()
    assert event["type"] == "error"
    if vllm:
        assert (event["code"], event["error"]) == ("invalid_json", "Invalid JSON")
    else:
        assert event["error"]["code"] == "invalid_payload"
        assert event["error"]["event_id"] is None
    assert await rt.quiet()
    await rt.comm.disconnect()
    await released(embedded_worker, api_key.account_id, before)
    assert error_logs(caplog.records) == []


# Item 1: whatever a handler raises, the one boundary releases everything once.


def boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("injected bug")


@pytest.mark.parametrize("vllm", [False, True], ids=["openai", "vllm"])
@pytest.mark.parametrize("where", ["receive", "worker-reply", "timer"])
async def test_i9_1_a_bug_in_any_handler_releases_everything_once(
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    fast_vad_settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    where: str,
    vllm: bool,
) -> None:
    api_key, raw = await keyed()
    before = active_streams("asr")
    rt = await open_rt(raw, vllm=vllm)
    if vllm:
        await rt.send({"type": "session.update", "model": "whisper-1"})
        assert (await rt.recv())["type"] == "session.updated"
        await rt.send(COMMIT)  # non-final: stream deltas from now on
    if where == "receive":
        monkeypatch.setattr("asr.front_end.FrontEnd.append", boom)
    elif where == "worker-reply":
        monkeypatch.setattr(AsrFinal, "from_message", classmethod(boom))
    else:
        monkeypatch.setattr("accounts.admission.Admission.tick", boom)
    await rt.append(silence(3.0, rate=16000 if vllm else 24000))
    await rt.send({**COMMIT, "final": True} if vllm else COMMIT)
    events, close = await rt.closed()
    assert close["code"] == 1011
    error = events[-1]
    if vllm:
        assert (error["type"], error["code"]) == ("error", "processing_error")
    else:
        assert error["error"]["code"] == "internal_error"
        assert error["error"]["type"] == "server_error"
    await released(embedded_worker, api_key.account_id, before)
    record = await UsageRecord.objects.aget(account_id=api_key.account_id)
    assert (record.status, record.error_code, record.close_code) == (
        "failed",
        "internal_error",
        1011,
    )
    logged = error_logs(caplog.records)
    assert len(logged) == 1 and logged[0].exc_info is not None, logged


@pytest.mark.parametrize("where", ["own-channel-receive", "worker-reply", "database"])
async def test_i31_an_outage_anywhere_ends_the_session_with_1013(
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    fast_vad_settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    where: str,
) -> None:
    """Issue 31: Redis or the database failing under a session, wherever it shows, is
    ``service_unavailable`` (§3.4) and 1013; released as failed, no traceback."""
    api_key, raw = await keyed()
    before = active_streams("asr")
    if where == "database":  # the record cannot be opened: no session.created
        monkeypatch.setattr("accounts.metering.usage_open", database_gone)
    rt = await open_rt(raw, created=where != "database")
    if where == "worker-reply":
        monkeypatch.setattr(AsrFinal, "from_message", classmethod(redis_gone))
        await rt.append(silence(1.0))
        await rt.send(COMMIT)
    elif where == "own-channel-receive":
        fail_own_channel_receive(monkeypatch)
    events, close = await rt.closed()
    assert close["code"] == 1013
    assert (events[-1]["error"]["type"], events[-1]["error"]["code"]) == (
        "server_error",
        "service_unavailable",
    )
    await released(embedded_worker, api_key.account_id, before)
    if where != "database":
        record = await UsageRecord.objects.aget(account_id=api_key.account_id)
        assert ended_by(record) == ENDED_BY_OUTAGE
    assert_quiet(caplog.records)


async def test_i9_1_a_bug_while_admitting_releases_the_lease(
    keyed: KeyMaker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No worker answers yet; the bug is in the consumer's own submit path."""
    api_key, raw = await keyed()
    before = active_streams("asr")
    monkeypatch.setattr("asr.messages.AsrOpen.to_message", boom)
    rt = await open_rt(raw, created=False)
    events, close = await rt.closed()
    assert close["code"] == 1011
    assert events[-1]["error"]["code"] == "internal_error"

    async def clean() -> bool:
        return active_streams("asr") == before and await lease_free(api_key.account_id)

    assert await settled(clean)
    assert len(error_logs(caplog.records)) == 1


# Item 4: bounded memory and control traffic per session.


async def test_i9_4_audio_sent_before_admission_is_capped_at_a_few_mb(
    keyed: KeyMaker, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.ASR_WORKER_ANSWER_MS = 5000  # no worker: admission waits this long
    api_key, raw = await keyed()
    before = active_streams("asr")
    rt = await open_rt(raw, created=False)
    chunk = b64(silence(2.0))  # 128 KB of base64 per append
    for _ in range(48):  # 6 MB
        await rt.send({"type": "input_audio_buffer.append", "audio": chunk})
    events, close = await rt.closed(timeout=3)
    assert [e["type"] for e in events] == ["error"]
    assert events[0]["error"]["code"] == "buffer_overflow"
    assert close["code"] == 1009

    async def clean() -> bool:
        return active_streams("asr") == before and await lease_free(api_key.account_id)

    assert await settled(clean)
    assert error_logs(caplog.records) == []


async def test_i9_4_unfinished_audio_across_items_is_capped(
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    fast_vad_settings: Any,
    settings: Any,
) -> None:
    settings.ASR_MAX_PENDING_S = 12
    engine = embedded_worker.engines["asr"].engine
    assert isinstance(engine, FakeAsr)
    engine.delay_s = 30.0  # nothing finishes: every committed item stays retained
    api_key, raw = await keyed()
    before = active_streams("asr")
    rt = await open_rt(raw)
    for _ in range(3):
        await rt.append(silence(4.0))
        await rt.send(COMMIT)
        await rt.until("conversation.item.added")
    await rt.append(silence(4.0))
    events, close = await rt.closed()
    assert events[-1]["error"]["code"] == "buffer_overflow"
    assert close["code"] == 1009
    await released(embedded_worker, api_key.account_id, before)


@pytest.mark.parametrize("vllm", [False, True], ids=["openai", "vllm"])
async def test_i9_4_prompt_has_a_length_cap(
    embedded_worker: WorkerRuntime, keyed: KeyMaker, vllm: bool, settings: Any
) -> None:
    api_key, raw = await keyed()
    rt = await open_rt(raw, vllm=vllm)
    prompt = "word " * 2000
    if vllm:
        await rt.send(
            {"type": "session.update", "model": "whisper-1", "prompt": prompt}
        )
        error = await rt.recv()
        assert (error["type"], error["code"]) == ("error", "invalid_event")
    else:
        await rt.send(update(transcription={"prompt": prompt}))
        error = (await rt.recv())["error"]
        assert error["code"] == "invalid_value"
        assert error["param"] == "session.audio.input.transcription.prompt"
    fits = "word " * (settings.ASR_MAX_PROMPT_CHARS // 5)
    if vllm:
        await rt.send({"type": "session.update", "model": "whisper-1", "prompt": fits})
    else:
        await rt.send(update(transcription={"prompt": fits}))
    assert (await rt.recv())["type"] == "session.updated"
    await rt.comm.disconnect()


async def test_i9_4_event_ids_are_echoed_only_when_short(
    embedded_worker: WorkerRuntime, keyed: KeyMaker
) -> None:
    api_key, raw = await keyed()
    rt = await open_rt(raw)
    await rt.send({"type": "made.up", "event_id": "e" * 100_000})
    error = (await rt.recv())["error"]
    assert error["code"] == "invalid_value" and error["param"] == "event_id"
    assert error["event_id"] is None
    await rt.send({"type": "made.up", "event_id": "client_event_1"})
    error = (await rt.recv())["error"]
    assert (error["code"], error["event_id"]) == ("unknown_event", "client_event_1")
    await rt.comm.disconnect()


@pytest.mark.parametrize(
    "event",
    [
        update(format={"type": "audio/pcm", "rate": 24000}),
        {"type": "input_audio_buffer.clear"},
    ],
    ids=["session.update", "clear"],
)
async def test_i9_4_a_control_event_flood_is_refused(
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    event: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    api_key, raw = await keyed()
    before = active_streams("asr")
    rt = await open_rt(raw)
    for _ in range(500):
        await rt.send(event)
    events, close = await rt.closed()
    assert events[-1]["error"]["code"] == "rate_limit_exceeded"
    assert close["code"] == 1008
    assert len(events) <= 41
    await released(embedded_worker, api_key.account_id, before)
    assert error_logs(caplog.records) == []


async def test_i9_1_a_cancelled_consumer_still_releases_everything(
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    fast_vad_settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Daphne cancels an instance that outlives its close timeout; so may a test."""
    api_key, raw = await keyed()
    before = active_streams("asr")
    rt = await open_rt(raw)
    await rt.append(silence(1.0))
    rt.comm.future.cancel()
    await asyncio.gather(rt.comm.future, return_exceptions=True)
    await released(embedded_worker, api_key.account_id, before)
    record = await UsageRecord.objects.aget(account_id=api_key.account_id)
    assert (record.status, record.close_code) == ("completed", 1006)
    assert error_logs(caplog.records) == []
