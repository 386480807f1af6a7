"""Accounting under faults, in the distributed topology (issue 30).

A ``rungateway`` and a ``gpuworker`` (fake engines) on a private ``redis-server`` and a
PostgreSQL cluster of this module (``PrivatePostgres``; the shared server is never stopped).
Four faults, each with a TTS stream (timestamps on, so the client knows which segments
reached it whole) and a realtime session in flight:

* ``kill -9`` of the worker;
* PostgreSQL stopped for 5 s while both end (their finalizations land from the journal);
* Redis stopped for 3 s;
* ``kill -9`` of the gateway while both are idle mid-request (the reaper settles them from
  the journal's last counters: the database checkpoints every 30 s here, so it has none).

After each: for every stream the record bills what the client received (characters of the
segments it got whole, the audio it got, the audio it sent), its status and close code are
the ones the client saw, nothing is left ``started``, and ``manage.py usage_audit`` is clean.
Each prints a ``FAULT`` line: what was delivered, what was billed.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
import websockets

from tests.conftest import free_port
from tests.support.outages import ENDED_BY_OUTAGE
from tests.support.private_postgres import PrivatePostgres, wait_accepting
from tests.support.private_redis import PrivateRedis
from tests.support.services import (
    Service,
    project_env,
    run_manage,
    start_gateway,
    start_worker,
    wait_ready,
)
from veena_site.conf.registry import child_environment

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

RATE = 16_000
SENTENCE = "This sentence is one whole segment of speech. "  # 46 chars, 460 ms
LAND_S = 30.0  # a journaled finalization lands within this after the database is back
ACCOUNT_SCRIPT = """
from accounts.models.accounts import Account
from accounts.models.plans import Plan
from accounts.services.api_keys import api_key_create
plan = Plan.objects.create(name="faults", requests_per_minute=1000,
    max_concurrent_streams=20, max_session_seconds=600)
account = Account.objects.create(name="Faults", slug="faults", plan=plan)
print(api_key_create(account=account, name="k", actor=None, actor_label="faults")[1])
"""
REAP_SCRIPT = (
    "from accounts.tasks import reap_abandoned_usage; print(reap_abandoned_usage())"
)


@dataclass
class Cluster:
    env: dict[str, str]
    data: Path
    pg: PrivatePostgres
    redis: PrivateRedis
    database: str
    key: str
    port: int = 0
    gateway: Service | None = None
    worker: Service | None = None
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())

    def start_worker(self) -> None:
        self.worker = start_worker(
            self.env, self.data / f"worker-{time.time():.0f}.log"
        )

    def start_gateway(self) -> None:
        self.port = free_port()
        log = self.data / f"gateway-{self.port}.log"
        self.gateway = start_gateway(self.env, self.port, log)

    def ready(self) -> None:
        assert self.gateway is not None and self.worker is not None
        wait_ready(self.port, self.gateway, self.worker, limit_s=120)

    def record(self, request_id: str) -> dict[str, Any]:
        with psycopg.connect(self.database) as conn:
            cursor = conn.execute(
                "SELECT endpoint, status, error_code, close_code, tts_chars_in,"
                " tts_audio_out_ms, asr_audio_in_ms FROM accounts_usagerecord WHERE request_id = %s",
                (request_id,),
            )
            names = [c.name for c in cursor.description or []]
            rows = cursor.fetchall()
        assert len(rows) == 1, (request_id, rows)
        return dict(zip(names, rows[0], strict=True))

    def started(self) -> int:
        with psycopg.connect(self.database) as conn:
            row = conn.execute(
                "SELECT count(*) FROM accounts_usagerecord WHERE status = 'started'"
            ).fetchone()
        return int(row[0]) if row else 0

    def audit_clean(self) -> str:
        """``manage.py usage_audit`` since the module began (fails on any drift)."""
        return run_manage("usage_audit", "--since", self.started_at, env=self.env)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    data = tmp_path_factory.mktemp("ledger-faults")
    pg = PrivatePostgres(data / "pg")
    pg.init()
    pg.start()
    redis_server = PrivateRedis(data / "redis.log")
    redis_server.start()
    database = pg.create_database("faults")
    env = project_env(
        data,
        DATABASE_URL=database,
        REDIS_URL=redis_server.url,
        CHANNEL_PREFIX=f"lf{uuid.uuid4().hex[:6]}",
        REDIS_KEY_PREFIX=f"lf{uuid.uuid4().hex[:6]}:",
        FAKE_TTS_CHUNK_DELAY_S="0.05",
        ASR_TRIM_NONSPEECH="false",
        USAGE_CHECKPOINT_SECONDS="30",
        LEASE_TTL_SECONDS="6",
        LEASE_RENEW_SECONDS="2",
    )
    run_manage("migrate", "--noinput", env=env, timeout=300)
    key = run_manage("shell", "-c", ACCOUNT_SCRIPT, env=env).strip().splitlines()[-1]
    cluster = Cluster(env, data, pg, redis_server, database, key)
    cluster.start_worker()
    cluster.start_gateway()
    try:
        cluster.ready()
        yield cluster
    finally:
        for service in (cluster.gateway, cluster.worker):
            if service is not None:
                service.stop()
        redis_server.kill()
        pg.destroy()


# Clients that keep what they received.


class Client:
    """One socket, read by a task of its own: events, audio bytes, the close code."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self.audio = 0
        self.close_code: int | None = None
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, cluster: Cluster, path: str) -> Client:
        ws = await websockets.connect(
            f"ws://127.0.0.1:{cluster.port}{path}",
            additional_headers={"Authorization": f"Bearer {cluster.key}"},
        )
        return cls(ws)

    async def _read(self) -> None:
        try:
            async for message in self.ws:
                if isinstance(message, bytes):
                    self.audio += len(message)
                else:
                    self.events.append(json.loads(message))
        except websockets.ConnectionClosed:
            pass
        self.close_code = self.ws.close_code

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event", e.get("type")) == name]

    async def until(self, name: str, count: int = 1, timeout: float = 30) -> None:
        async with asyncio.timeout(timeout):
            while len(self.named(name)) < count:
                assert not self.reader.done(), self.events[-3:]
                await asyncio.sleep(0.02)

    async def closed(self, timeout: float = 30) -> int | None:
        async with asyncio.timeout(timeout):
            await asyncio.shield(self.reader)
        return self.close_code

    def delivered_chars(self) -> int:
        """Characters of the segments whose last frame arrived (no complete was sent:
        every ``segment_end`` followed its segment's last frame)."""
        spans = {
            e["seq"]: e["char_end"] - e["char_start"]
            for e in self.named("segment_start")
        }
        return sum(spans[e["seq"]] for e in self.named("segment_end"))

    def audio_ms(self) -> int:
        return self.audio // 2 * 1000 // RATE


async def tts(cluster: Cluster, request_id: str, sentences: int) -> Client:
    client = await Client.open(cluster, "/v1/tts/ws")
    request = {
        "text": SENTENCE * sentences,
        "format": "pcm",
        "sample_rate": RATE,
        "timestamps": True,
        "chunking": True,
        "request_id": request_id,
    }
    await client.ws.send(json.dumps(request))
    return client


async def realtime(cluster: Cluster, seconds: float) -> tuple[Client, str, int]:
    """A realtime session that appended ``seconds`` of audio: client, its id, its ms."""
    client = await Client.open(cluster, "/v1/realtime")
    await client.until("session.created")
    session_id = client.named("session.created")[0]["session"]["id"]
    pcm = bytes(2 * int(seconds * 24_000))
    for i in range(0, len(pcm), 9_600):
        chunk = base64.b64encode(pcm[i : i + 9_600]).decode()
        await client.ws.send(
            json.dumps({"type": "input_audio_buffer.append", "audio": chunk})
        )
    return client, session_id, len(pcm) // 2 * 1000 // 24_000


async def settled(
    cluster: Cluster, request_id: str, limit_s: float = LAND_S
) -> dict[str, Any]:
    """The record once it is no longer ``started``."""
    deadline = time.monotonic() + limit_s
    while True:
        record = await asyncio.to_thread(cluster.record, request_id)
        if record["status"] != "started" or time.monotonic() > deadline:
            assert record["status"] != "started", record
            return record
        await asyncio.sleep(0.2)


@dataclass
class Streams:
    """The TTS stream and the realtime session of one fault, and what they were sent."""

    speech: Client
    tts_id: str
    text_chars: int  # what the TTS request asked for
    asr: Client
    session_id: str
    sent_ms: int  # audio the session appended


def billed_text(record: dict[str, Any]) -> str:
    if record["endpoint"] == "asr":
        billed = f"{record['asr_audio_in_ms']} ms in"
    else:
        billed = f"{record['tts_chars_in']} chars, {record['tts_audio_out_ms']} ms out"
    code = record["error_code"] or "-"
    return f"billed {billed} ({record['status']}/{code}/{record['close_code']})"


async def outcome(
    cluster: Cluster, fault: str, streams: Streams, *, closes: Any = None, **wait: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both records once settled, checked: billed = delivered (a completed TTS request:
    its text; else its whole segments and the audio it got), and the close codes are the
    ones the clients saw, or ``closes`` where the server sent none."""
    speech, asr = streams.speech, streams.asr
    tts_record = await settled(cluster, streams.tts_id, **wait)
    asr_record = await settled(cluster, streams.session_id, **wait)
    completed = tts_record["status"] == "completed"
    chars = streams.text_chars if completed else speech.delivered_chars()
    assert (tts_record["tts_chars_in"], tts_record["tts_audio_out_ms"]) == (
        chars,
        speech.audio_ms(),
    ), (tts_record, speech.events[-3:])
    assert asr_record["asr_audio_in_ms"] == streams.sent_ms, asr_record
    expected = closes or (speech.close_code, asr.close_code)
    assert (tts_record["close_code"], asr_record["close_code"]) == expected
    print(
        f"\nFAULT {fault}: tts delivered {chars} chars, {speech.audio_ms()} ms, "
        f"{billed_text(tts_record)}; asr sent {streams.sent_ms} ms, "
        f"{billed_text(asr_record)}"
    )
    return tts_record, asr_record


def journal_holds(
    cluster: Cluster, audio_ms: dict[str, int], limit_s: float = 10
) -> float:
    """Seconds until the journal's live entries of these requests hold their audio."""
    client = redis.Redis.from_url(cluster.env["REDIS_URL"])
    key = f"{cluster.env['REDIS_KEY_PREFIX']}usage:journal:live"
    started = time.monotonic()
    while True:
        entries = [json.loads(v) for v in client.hvals(key)]
        held = {
            e["record"]["request_id"]: max(
                e["counters"]["tts_audio_out_ms"], e["counters"]["asr_audio_in_ms"]
            )
            for e in entries
        }
        if all(held.get(rid) == ms for rid, ms in audio_ms.items()):
            return time.monotonic() - started
        assert time.monotonic() - started < limit_s, (held, audio_ms)
        time.sleep(0.1)


def finish_phase(cluster: Cluster) -> None:
    assert cluster.started() == 0
    cluster.audit_clean()


# The faults, in order, on one cluster.


async def test_worker_kill_bills_what_was_delivered(cluster: Cluster) -> None:
    speech = await tts(cluster, "wk-tts", sentences=40)
    await speech.until("segment_end", count=3)
    asr, session_id, sent_ms = await realtime(cluster, 1.5)
    await asyncio.sleep(0.3)
    assert cluster.worker is not None
    cluster.worker.kill()
    await speech.closed()
    await asr.closed()
    streams = Streams(speech, "wk-tts", len(SENTENCE) * 40, asr, session_id, sent_ms)
    tts_record, asr_record = await outcome(cluster, "worker kill -9", streams)
    assert tts_record["status"] == asr_record["status"] == "failed"
    cluster.start_worker()
    await asyncio.to_thread(cluster.ready)
    finish_phase(cluster)


async def test_postgres_stopped_5s_lands_every_end_from_the_journal(
    cluster: Cluster,
) -> None:
    speech = await tts(cluster, "pg-tts", sentences=4)  # ~1 s of synthesis
    asr, session_id, sent_ms = await realtime(cluster, 2.0)
    await speech.until("header")
    await asyncio.to_thread(cluster.pg.stop)
    stopped = time.monotonic()
    await asr.ws.close()  # both end while the database is down
    await speech.closed()
    await asr.closed()
    await asyncio.sleep(max(0.0, 5.0 - (time.monotonic() - stopped)))
    await asyncio.to_thread(cluster.pg.start)
    back = time.monotonic()
    await asyncio.to_thread(wait_accepting, cluster.pg)
    streams = Streams(speech, "pg-tts", len(SENTENCE) * 4, asr, session_id, sent_ms)
    tts_record, asr_record = await outcome(cluster, "PostgreSQL stopped 5 s", streams)
    print(f"landed {time.monotonic() - back:.1f} s after PostgreSQL was back")
    assert (tts_record["status"], asr_record["status"]) == ("completed", "completed")
    finish_phase(cluster)


async def test_redis_stopped_3s_records_the_true_code_and_delivered_units(
    cluster: Cluster,
) -> None:
    speech = await tts(cluster, "rd-tts", sentences=40)
    await speech.until("segment_end", count=2)
    asr, session_id, sent_ms = await realtime(cluster, 1.0)
    await asyncio.sleep(0.3)
    cluster.redis.kill()
    await asyncio.sleep(3.0)
    await asyncio.to_thread(cluster.redis.start)
    await speech.closed()
    await asr.closed()
    streams = Streams(speech, "rd-tts", len(SENTENCE) * 40, asr, session_id, sent_ms)
    records = await outcome(cluster, "Redis stopped 3 s", streams)
    # An outage ends both with the protocol's service-unavailable error and 1013 (issue
    # 31), and the records say so (tests/support/outages.py: ENDED_BY_OUTAGE).
    ended = [(r["status"], r["error_code"], r["close_code"]) for r in records]
    assert ended == [ENDED_BY_OUTAGE, ENDED_BY_OUTAGE], ended
    await asyncio.to_thread(cluster.ready)
    finish_phase(cluster)


async def test_gateway_kill_settles_from_the_journals_last_counters(
    cluster: Cluster,
) -> None:
    speech = await Client.open(cluster, "/v1/tts/ws")
    start = {"event": "start", "format": "pcm", "sample_rate": RATE, "timestamps": True}
    await speech.ws.send(json.dumps({**start, "request_id": "gk-tts"}))
    await speech.ws.send(json.dumps({"event": "text", "text": SENTENCE * 2}))
    await speech.ws.send(json.dumps({"event": "flush"}))
    await speech.until("flushed")
    asr, session_id, sent_ms = await realtime(cluster, 2.0)
    # Idle mid-request: wait until the ticks have noted every counter in the journal.
    noted = {"gk-tts": speech.audio_ms(), session_id: sent_ms}
    waited = await asyncio.to_thread(journal_holds, cluster, noted)
    print(f"journal held the last counters {waited:.1f} s after the last audio")
    assert cluster.gateway is not None
    cluster.gateway.kill()
    await speech.closed()
    await asr.closed()
    await asyncio.sleep(2.5)  # older than the reaper's USAGE_STALE_SECONDS below
    reaper_env = child_environment(cluster.env, USAGE_STALE_SECONDS=2)  # a constant
    reaped = run_manage("shell", "-c", REAP_SCRIPT, env=reaper_env).strip()
    assert reaped.splitlines()[-1].strip() == "2", reaped
    # The server sent no close: the process died; the client saw the connection drop.
    assert speech.close_code == asr.close_code == 1006
    streams = Streams(speech, "gk-tts", len(SENTENCE) * 2, asr, session_id, sent_ms)
    fault = "gateway kill -9 (settled from the journal)"
    records = await outcome(cluster, fault, streams, closes=(None, None), limit_s=1)
    assert [r["status"] for r in records] == ["abandoned", "abandoned"]
    cluster.start_gateway()
    await asyncio.to_thread(cluster.ready)
    finish_phase(cluster)
