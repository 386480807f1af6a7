"""Issue 9 on ``/v1/tts/ws`` and ``POST /v1/tts``: malformed input is a protocol error, a bug
in any handler still releases everything once, and per-stream memory and control traffic are
bounded. Each test names the issue's table row or item it proves."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator

from accounts.models.usage import UsageRecord
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
from tests.tts.conftest import bearer, lease_free
from tests.tts.test_rest import auth, request
from tts.messages import TtsChunk
from veena_site.asgi import application
from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "Hello world. How are you today?"


class RawStream:
    """A TTS socket whose every server frame is checked to be sendable as UTF-8."""

    def __init__(self, comm: WebsocketCommunicator) -> None:
        self.comm = comm
        self.events: list[dict[str, Any]] = []
        self.close_code: int | None = None

    async def send(self, message: str | bytes | dict[str, Any]) -> None:
        if isinstance(message, bytes):
            await self.comm.send_to(bytes_data=message)
        else:
            text = message if isinstance(message, str) else json.dumps(message)
            await self.comm.send_to(text_data=text)

    async def next(self, timeout: float = 5) -> dict[str, Any] | bytes | None:
        """The next event (dict), binary frame (bytes) or None at the close."""
        out = await self.comm.receive_output(timeout=timeout)
        if out["type"] == "websocket.close":
            self.close_code = out.get("code", 1000)
            return None
        if out.get("bytes") is not None:
            return bytes(out["bytes"])
        assert encodable(out["text"]), f"unsendable text frame: {out['text']!r:.200}"
        event = json.loads(out["text"])
        self.events.append(event)
        return event

    async def error(self, timeout: float = 5) -> dict[str, Any]:
        while True:
            item = await self.next(timeout)
            assert item is not None, f"closed before an error: {self.events}"
            if isinstance(item, dict) and item.get("event") == "error":
                return item["error"]

    async def closed(self, timeout: float = 5) -> int:
        while await self.next(timeout) is not None:
            pass
        assert self.close_code is not None
        return self.close_code


async def open_raw(raw_key: str) -> RawStream:
    comm = WebsocketCommunicator(application, "/v1/tts/ws", headers=bearer(raw_key))
    connected, _ = await comm.connect()
    assert connected
    return RawStream(comm)


async def released(runtime: WorkerRuntime, account_id: int, before: float) -> None:
    """Every resource of the stream is back: gauge, worker slot, lease, record."""

    async def clean() -> bool:
        return (
            active_streams("tts") == before
            and runtime.jobs.busy("tts") == 0
            and await lease_free(account_id)
            and await started_records() == 0
        )

    assert await settled(clean), (
        active_streams("tts") - before,
        runtime.jobs.busy("tts"),
        await lease_free(account_id),
        await started_records(),
    )


# The issue's table, and item 2's class: whatever a JSON parser can raise, every wrong value.

MALFORMED = {
    "row-1-deep-nesting": "[" * 5000,
    "deep-nesting-in-a-field": '{"text": ' + "[" * 5000,
    "deep-but-complete": '{"text":"hi","x":' + "[" * 200 + "]" * 200 + "}",
    "row-2-lone-surrogate-escape": '{"event":"\\udc80"}',
    "lone-surrogate-character": '{"event":"\udc80"}',
    "lone-surrogate-in-the-text": '{"text":"hi \\ud800 there"}',
    "huge-integer-literal": '{"text":"hi","seed":' + "9" * 5000 + "}",
    "nan": '{"text":"hi","temperature":NaN}',
    "infinity": '{"text":"hi","speed":-Infinity}',
    "float-overflowing-to-infinity": '{"text":"hi","top_p":1e999}',
}


@pytest.mark.parametrize("text", MALFORMED.values(), ids=MALFORMED.keys())
async def test_i9_2_malformed_json_is_invalid_json_and_releases(
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    text: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    api_key, raw = await keyed()
    before = active_streams("tts")
    stream = await open_raw(raw)
    await stream.send(text)
    error = await stream.error()
    assert (error["code"], error["fatal"]) == ("INVALID_JSON", True)
    assert error["message"].startswith("Invalid JSON: ")
    assert await stream.closed() == 1003
    await released(embedded_worker, api_key.account_id, before)
    assert error_logs(caplog.records) == []


WRONG_VALUES = {
    "flush-id-beyond-int64": {"event": "flush", "flush_id": 2**70},
    "flush-id-a-list": {"event": "flush", "flush_id": [1]},
    "text-an-object": {"event": "text", "text": {"a": 1}},
    "cancel-id-a-number": {"event": "cancel", "request_id": 7},
}


@pytest.mark.parametrize("event", WRONG_VALUES.values(), ids=WRONG_VALUES.keys())
async def test_i9_2_wrong_values_while_active_are_ignored_with_a_warning(
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    event: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    api_key, raw = await keyed()
    before = active_streams("tts")
    stream = await open_raw(raw)
    await stream.send({"event": "start", "request_id": "inc", "keep_alive": True})
    while (item := await stream.next()) is not None:
        if isinstance(item, dict) and item.get("event") == "header":
            break
    await stream.send(event)
    await stream.send({"event": "end"})
    while (item := await stream.next()) is not None:
        if isinstance(item, dict) and item["event"] == "complete":
            break
    seen = [(e["event"], e.get("code")) for e in stream.events]
    assert ("warning", "IGNORED_MESSAGE") in seen, seen
    assert "flushed" not in [kind for kind, _ in seen]
    assert stream.events[-1]["metrics"]["cancelled"] is False
    await stream.comm.disconnect()
    await released(embedded_worker, api_key.account_id, before)
    assert error_logs(caplog.records) == []


# Item 1: whatever a handler raises, the one boundary releases everything once.


def boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("injected bug")


@pytest.mark.parametrize("where", ["receive", "worker-reply", "timer"])
async def test_i9_1_a_bug_in_any_handler_releases_everything_once(
    slow_fake: WorkerRuntime,
    keyed: KeyMaker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    where: str,
) -> None:
    api_key, raw = await keyed()
    before = active_streams("tts")
    stream = await open_raw(raw)
    if where == "receive":
        monkeypatch.setattr("tts.text.has_speakable", boom)
    elif where == "worker-reply":
        monkeypatch.setattr(TtsChunk, "from_message", classmethod(boom))
    else:
        monkeypatch.setattr("accounts.admission.Admission.tick", boom)
    await stream.send({"text": "Hello there. " * 100, "request_id": "bug"})
    error = await stream.error(timeout=10)
    assert (error["code"], error["fatal"]) == ("INTERNAL_ERROR", True)
    assert error["message"] == "Internal server error"
    assert await stream.closed() == 1011
    await released(slow_fake, api_key.account_id, before)
    if where != "receive":  # the record opens after the text is prepared
        record = await UsageRecord.objects.aget(request_id="bug")
        assert (record.status, record.error_code, record.close_code) == (
            "failed",
            "internal_error",
            1011,
        )
    logged = error_logs(caplog.records)
    assert len(logged) == 1 and logged[0].exc_info is not None, logged


@pytest.mark.parametrize("where", ["own-channel-receive", "worker-reply", "database"])
async def test_i31_an_outage_anywhere_ends_the_stream_with_1013(
    slow_fake: WorkerRuntime,
    keyed: KeyMaker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    where: str,
) -> None:
    """Issue 31: Redis or the database failing under a stream, wherever it shows, is §6's
    STREAMING_OVERLOADED with a retry hint and 1013; released as failed, no traceback."""
    api_key, raw = await keyed()
    before = active_streams("tts")
    stream = await open_raw(raw)
    if where == "database":  # the record cannot be opened
        monkeypatch.setattr("accounts.metering.usage_open", database_gone)
    else:
        await stream.send({"text": "Hello there. " * 100, "request_id": "cut"})
        while not isinstance(await stream.next(), bytes):
            pass
        if where == "worker-reply":
            monkeypatch.setattr(TtsChunk, "from_message", classmethod(redis_gone))
        else:
            fail_own_channel_receive(monkeypatch)
    if where == "database":
        await stream.send({"text": "Hello there.", "request_id": "cut"})
    error = await stream.error(timeout=10)
    assert (error["code"], error["fatal"]) == ("STREAMING_OVERLOADED", True)
    assert error["retry_after_ms"] >= 1
    assert await stream.closed() == 1013
    await released(slow_fake, api_key.account_id, before)
    if where != "database":
        record = await UsageRecord.objects.aget(request_id="cut")
        assert ended_by(record) == ENDED_BY_OUTAGE
    assert_quiet(caplog.records)


async def test_i9_1_a_failing_release_step_does_not_skip_the_others(
    slow_fake: WorkerRuntime,
    keyed: KeyMaker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    api_key, raw = await keyed()
    before = active_streams("tts")
    stream = await open_raw(raw)
    await stream.send({"text": "Hello there. " * 100, "request_id": "half"})
    while not isinstance(await stream.next(), bytes):
        pass
    monkeypatch.setattr("accounts.metering.UsageMeter.finish", boom)
    await stream.comm.disconnect()

    async def clean() -> bool:
        return (
            active_streams("tts") == before
            and slow_fake.jobs.busy("tts") == 0
            and await lease_free(api_key.account_id)
        )

    assert await settled(clean)
    assert len(error_logs(caplog.records)) == 1


async def test_i9_1_rest_bug_finalizes_the_record_and_frees_the_lease(
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    api_key, raw = await keyed()
    monkeypatch.setattr("tts.client.ChannelJob._chunks", boom)
    response = await request(
        "POST",
        "/v1/tts",
        json.dumps({"text": TEXT}).encode(),
        {**auth(raw), "X-Request-Id": "rest-bug"},
    )
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "INTERNAL_ERROR"
    assert response.json()["error"]["message"] == "Internal server error"
    record = await UsageRecord.objects.aget(request_id="rest-bug")
    assert (record.status, record.error_code) == ("failed", "internal_error")
    assert await lease_free(api_key.account_id)
    assert await settled(lambda: _idle(embedded_worker))
    logged = error_logs(caplog.records)
    assert len(logged) == 1 and logged[0].exc_info is not None, logged


async def _idle(runtime: WorkerRuntime) -> bool:
    return runtime.jobs.busy("tts") == 0


REST_BODIES = {
    "deep-nesting": b"[" * 5000,
    "huge-integer-literal": b'{"text":"hi","seed":' + b"9" * 5000 + b"}",
    "nan": b'{"text":"hi","temperature":NaN}',
    "encoded-lone-surrogate": b'{"text":"hi \xed\xb2\x80"}',
    "escaped-lone-surrogate": b'{"text":"hi \\udc80"}',
    "invalid-utf8": b'{"text":"hi \xff"}',
}


@pytest.mark.parametrize("body", REST_BODIES.values(), ids=REST_BODIES.keys())
async def test_i9_2_rest_malformed_bodies_are_400_invalid_json(
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    body: bytes,
    caplog: pytest.LogCaptureFixture,
) -> None:
    api_key, raw = await keyed()
    response = await request("POST", "/v1/tts", body, auth(raw))
    assert response.status_code == 400, response.content[:200]
    assert response.json()["error"]["code"] == "INVALID_JSON"
    assert await lease_free(api_key.account_id)
    assert await started_records() == 0
    assert error_logs(caplog.records) == []


# Item 4: control events cannot flood a worker's inbox.


async def test_i9_4_a_flush_flood_is_refused_before_it_reaches_the_worker(
    embedded_worker: WorkerRuntime,
    keyed: KeyMaker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    api_key, raw = await keyed()
    before = active_streams("tts")
    flushes: list[Any] = []
    from tts.messages import TtsFlush

    decode = TtsFlush.from_message  # the worker decodes each flush it receives

    def counting(message: dict[str, Any]) -> TtsFlush:
        flushes.append(message)
        return decode(message)

    monkeypatch.setattr(TtsFlush, "from_message", counting)
    stream = await open_raw(raw)
    await stream.send({"event": "start", "request_id": "flood"})
    while not (
        isinstance(item := await stream.next(), dict) and item["event"] == "header"
    ):
        pass  # accepted: flushes go straight to the worker from now on
    for _ in range(500):
        await stream.send({"event": "flush"})
    error = await stream.error()
    assert error["code"] == "RATE_LIMIT_EXCEEDED" and error["retry_after_ms"] >= 1
    assert await stream.closed() == 1008
    await released(embedded_worker, api_key.account_id, before)
    assert 0 < len(flushes) <= 40
    assert error_logs(caplog.records) == []


async def test_i9_4_a_ping_flood_is_refused(
    embedded_worker: WorkerRuntime, keyed: KeyMaker
) -> None:
    api_key, raw = await keyed()
    stream = await open_raw(raw)
    for _ in range(500):
        await stream.send({"event": "ping"})
    error = await stream.error()
    assert error["code"] == "RATE_LIMIT_EXCEEDED"
    assert await stream.closed() == 1008
    pongs = [e for e in stream.events if e["event"] == "pong"]
    assert 0 < len(pongs) <= 40


async def test_i9_4_pings_at_a_normal_pace_are_all_answered(
    embedded_worker: WorkerRuntime, keyed: KeyMaker
) -> None:
    api_key, raw = await keyed()
    stream = await open_raw(raw)
    for _ in range(15):
        await stream.send({"event": "ping"})
        assert await stream.next() == {"event": "pong"}
    await stream.send({"text": TEXT})
    assert await stream.closed() == 1000
    assert not [e for e in stream.events if e["event"] == "error"]


async def test_i9_4_slow_worker_replies_do_not_hold_a_crashed_stream(
    embedded_worker: WorkerRuntime, keyed: KeyMaker
) -> None:
    """After a fatal error the stream ignores late worker replies (no second release)."""
    api_key, raw = await keyed()
    before = active_streams("tts")
    stream = await open_raw(raw)
    await stream.send("[" * 5000)
    await stream.closed()
    await asyncio.sleep(0.05)
    await released(embedded_worker, api_key.account_id, before)


def test_i9_2_log_of_a_bad_message_names_no_client_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tts.protocol import TtsProtocolError, parse_client_event

    with caplog.at_level(logging.DEBUG), pytest.raises(TtsProtocolError):
        parse_client_event('{"text": "SECRET-TEXT", "temperature": NaN}', None)
    assert "SECRET-TEXT" not in caplog.text


async def test_i9_1_a_cancelled_consumer_still_releases_everything(
    slow_fake: WorkerRuntime, keyed: KeyMaker, caplog: pytest.LogCaptureFixture
) -> None:
    """Daphne cancels an instance that outlives its close timeout; so may a test."""
    api_key, raw = await keyed()
    before = active_streams("tts")
    stream = await open_raw(raw)
    await stream.send({"text": "Hello there. " * 100, "request_id": "cut"})
    while not isinstance(await stream.next(), bytes):
        pass
    stream.comm.future.cancel()
    await asyncio.gather(stream.comm.future, return_exceptions=True)
    await released(slow_fake, api_key.account_id, before)
    record = await UsageRecord.objects.aget(request_id="cut")
    assert (record.status, record.close_code) == ("cancelled", 1006)
    assert error_logs(caplog.records) == []
