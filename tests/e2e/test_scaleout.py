"""Scale-out with real processes (issue 17): 2 gateways × 2 workers on one Redis and PostgreSQL.

Two ``rungateway`` children and two ``gpuworker`` children (fake engines) share one Redis
(channel layer, limits, liveness) and one migrated PostgreSQL database. The tests check:

* jobs of both kinds (``/v1/tts/ws``, ``/v1/realtime``) land on both workers, counted from
  each worker's own log (``… job … accepted``) and the gateways' placement counters;
* a key's concurrency limit, rpm limit and a plan's monthly TTS quota hold exactly when the
  sessions are split over both gateways and sent at once;
* ``kill -9`` of a worker fails the sessions in flight on it with the protocol's error within
  5 s while new sessions go to the survivor;
* ``kill -9`` of a gateway leaves the other one serving, and the reaper task on a Celery
  worker marks the dead one's records ``abandoned``.

The cluster is shared by the module; the kill tests come last and each kills its own extra
process, so the others run against the full cluster. Each test prints one ``SCALEOUT`` line
with what it counted. A short request that fails with ``INTERNAL_ERROR`` (the gateway logs a
``chunk gap``) or ``MODEL_NOT_LOADED`` while its worker is alive means the gateway lost a
channel-layer message: sockets closing while other streams of the same gateway run (the
denied ones here) is when that has been seen.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
import websockets
from celery import Celery

from tests.asr.conftest import b64, silence
from tests.conftest import free_port
from tests.support.redis_db import redis_test_url
from tests.support.services import (
    Service,
    gauge,
    get_text,
    project_env,
    run_manage,
    start_celery,
    start_gateway,
    start_worker,
    wait_ready,
)

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres]

START_S = 120  # process start under a loaded machine
SURFACE_S = 5.0  # issue 9/17: a killed worker reaches the client within 5 s
IO_S = 20.0  # one protocol step under load


@dataclass
class Cluster:
    env: dict[str, str]
    database: str
    tmp: Path
    gateways: list[tuple[Service, int]]
    workers: list[Service]

    def ws(self, gateway: int, path: str) -> str:
        return f"ws://127.0.0.1:{self.gateways[gateway][1]}{path}"

    def add_worker(self, name: str) -> Service:
        worker = start_worker(self.env, self.tmp / f"{name}.log")
        worker.name = name
        self.workers.append(worker)
        return worker

    def add_gateway(self, name: str) -> tuple[Service, int]:
        port = free_port()
        gateway = start_gateway(self.env, port, self.tmp / f"{name}.log")
        gateway.name = name
        self.gateways.append((gateway, port))
        return gateway, port


def accepted_in(worker: Service, kind: str) -> int:
    """Jobs of ``kind`` this worker took into a slot, from its own log."""
    pattern = re.compile(rf"\b{kind} job \S+ accepted\b")
    return len(pattern.findall(worker.log.read_text(errors="replace")))


KEYS_SCRIPT = """
import json, uuid
from accounts.models import Account, Plan
from accounts.services.api_keys import api_key_create
out = {}
for name, plan, key in json.loads(SPECS):
    values = {"requests_per_minute": 1000, "max_concurrent_streams": 50,
              "monthly_tts_characters": None, "monthly_asr_seconds": None,
              "max_session_seconds": 600, **plan}
    slug = f"{name}-{uuid.uuid4().hex[:6]}"
    account = Account.objects.create(
        name=slug, slug=slug, plan=Plan.objects.create(name=slug, **values))
    _, raw = api_key_create(account=account, name="k", actor=None,
                            actor_label="pytest", **key)
    out[name] = raw
print("KEYS " + json.dumps(out))
"""


def make_keys(
    env: dict[str, str], specs: list[tuple[str, dict, dict]]
) -> dict[str, str]:
    """One key per spec (name, plan values, key fields), each on its own account and plan."""
    script = KEYS_SCRIPT.replace("SPECS", repr(json.dumps(specs)))
    out = run_manage("shell", "-c", script, env=env)
    line = next(x for x in out.splitlines() if x.startswith("KEYS "))
    return dict(json.loads(line[5:]))


@pytest.fixture(scope="module")
def cluster(
    pg_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("scaleout")
    env = project_env(
        tmp,
        DATABASE_URL=pg_database,
        REDIS_URL=redis_test_url(),
        CHANNEL_PREFIX=f"s{uuid.uuid4().hex[:8]}",
        REDIS_KEY_PREFIX=f"s{uuid.uuid4().hex[:8]}:",
        USAGE_CHECKPOINT_SECONDS="1",
        LEASE_TTL_SECONDS="6",
        LEASE_RENEW_SECONDS="2",
        FAKE_TTS_CHUNK_DELAY_S="0.05",
        ASR_TRIM_NONSPEECH="false",
        TTS_WORKER_SLOTS="8",
        ASR_WORKER_SLOTS="8",
        # Generous admission under a loaded machine: a slow answer is not a lost worker.
        TTS_ADMISSION_WAIT_MS="10000",
        ASR_ADMISSION_WAIT_MS="10000",
        TTS_WORKER_ANSWER_MS="5000",
        ASR_WORKER_ANSWER_MS="5000",
    )
    found = Cluster(env, pg_database, tmp, [], [])
    try:
        for name in ("worker-a", "worker-b"):
            found.add_worker(name)
        for name in ("gateway-a", "gateway-b"):
            found.add_gateway(name)
        for _, port in found.gateways:
            wait_ready(port, *found.workers, limit_s=START_S)
        wait_workers_live(found, 2)
        yield found
    finally:
        for service, _ in found.gateways:
            service.stop()
        for service in found.workers:
            service.stop()
    for service in [*found.workers, *(g for g, _ in found.gateways)]:
        assert "Traceback" not in service.log.read_text(), service.tail()


def live_workers(env: dict[str, str]) -> list[dict[str, Any]]:
    """The worker statuses in the liveness registry (ready or not)."""
    client = redis.Redis.from_url(env["REDIS_URL"])
    pattern = f"{env['CHANNEL_PREFIX']}:worker:*"
    found = (client.get(key) for key in client.scan_iter(match=pattern))
    return [json.loads(raw) for raw in found if raw]


def wait_workers_live(cluster: Cluster, count: int) -> None:
    """Wait until ``count`` workers publish ready engines of both kinds."""
    deadline = time.monotonic() + START_S
    while True:
        ready = [
            s
            for s in live_workers(cluster.env)
            if s.get("ready", {}).get("tts") and s.get("ready", {}).get("asr")
        ]
        if len(ready) >= count:
            return
        for worker in cluster.workers:
            assert worker.alive(), worker.tail()
        assert time.monotonic() < deadline, f"{len(ready)} of {count} workers ready"
        time.sleep(0.2)


def headers(raw: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {raw}"}


async def tts_open(url: str, raw: str, text: str) -> Any:
    """A TTS socket with one request sent; the first event (``header`` or ``error``) and it."""
    ws = await websockets.connect(
        url, additional_headers=headers(raw), open_timeout=IO_S
    )
    await ws.send(json.dumps({"text": text, "format": "pcm"}))
    while isinstance(message := await asyncio.wait_for(ws.recv(), IO_S), bytes):
        pass
    return json.loads(message), ws


async def tts_outcome(url: str, raw: str, text: str) -> str:
    """One whole TTS request: ``complete`` or the error code."""
    first, ws = await tts_open(url, raw, text)
    try:
        event = first
        while event["event"] not in ("complete", "error"):
            while isinstance(message := await asyncio.wait_for(ws.recv(), IO_S), bytes):
                pass
            event = json.loads(message)
        return "complete" if event["event"] == "complete" else event["error"]["code"]
    finally:
        await ws.close()


async def realtime_open(url: str, raw: str) -> tuple[dict[str, Any], Any]:
    """A realtime socket; its first event (``session.created`` or ``error``) and it."""
    ws = await websockets.connect(
        url, additional_headers=headers(raw), open_timeout=IO_S
    )
    return json.loads(await asyncio.wait_for(ws.recv(), IO_S)), ws


def placements(cluster: Cluster, kind: str) -> float:
    return sum(
        gauge(get_text(port, "/metrics"), "veena_job_placements_total", kind=kind)
        for _, port in cluster.gateways
    )


# (a) both kinds spread over both workers


async def test_jobs_of_both_kinds_spread_over_both_workers(cluster: Cluster) -> None:
    raw = make_keys(cluster.env, [("spread", {}, {})])["spread"]
    workers = cluster.workers[:2]
    before = {k: [accepted_in(w, k) for w in workers] for k in ("tts", "asr")}
    placed_before = {k: placements(cluster, k) for k in ("tts", "asr")}
    held = []
    for gateway in (0, 1):
        for _ in range(2):  # held open: the second goes where the first is not
            first, ws = await tts_open(
                cluster.ws(gateway, "/v1/tts/ws"), raw, "s" * 2000
            )
            assert first["event"] == "header", first
            held.append(ws)
            first, ws = await realtime_open(cluster.ws(gateway, "/v1/realtime"), raw)
            assert first["type"] == "session.created", first
            held.append(ws)
    for ws in held:
        await ws.close()
    took = {
        k: [accepted_in(w, k) - before[k][i] for i, w in enumerate(workers)]
        for k in ("tts", "asr")
    }
    placed = {k: placements(cluster, k) - placed_before[k] for k in ("tts", "asr")}
    print(f"\nSCALEOUT spread: accepted by worker {took}, placements {placed}")
    for kind in ("tts", "asr"):
        assert sum(took[kind]) == 4 and min(took[kind]) >= 1, took
        assert placed[kind] == 4, placed


# (b) limits hold exactly across both gateways


async def test_concurrency_limit_holds_across_gateways(cluster: Cluster) -> None:
    raw = make_keys(cluster.env, [("cc", {}, {"concurrency_limit": 3})])["cc"]
    opened = await asyncio.gather(
        *(tts_open(cluster.ws(i % 2, "/v1/tts/ws"), raw, "c" * 2000) for i in range(8))
    )
    try:
        events = [first for first, _ in opened]
        admitted = [e for e in events if e["event"] == "header"]
        denied = [e["error"]["code"] for e in events if e["event"] == "error"]
        print(f"\nSCALEOUT concurrency 3 of 8: admitted {len(admitted)}, {denied}")
        assert len(admitted) == 3, events
        assert denied == ["RATE_LIMIT_EXCEEDED"] * 5, events
    finally:
        for _, ws in opened:
            await ws.close()


async def test_rpm_limit_holds_across_gateways(cluster: Cluster) -> None:
    raw = make_keys(cluster.env, [("rpm", {}, {"rpm_limit": 5})])["rpm"]
    outcomes = await asyncio.gather(
        *(
            tts_outcome(cluster.ws(i % 2, "/v1/tts/ws"), raw, "Hello there.")
            for i in range(12)
        )
    )
    print(f"\nSCALEOUT rpm 5 of 12: {sorted(outcomes)}")
    assert outcomes.count("complete") == 5, outcomes
    assert outcomes.count("RATE_LIMIT_EXCEEDED") == 7, outcomes


def tts_characters_charged(database: str, raw_prefix: str) -> list[int]:
    with psycopg.connect(database) as conn:
        rows = conn.execute(
            "SELECT r.tts_chars_in FROM accounts_usagerecord r "
            "JOIN accounts_account a ON a.id = r.account_id "
            "WHERE a.slug LIKE %s AND r.endpoint = 'tts'",
            (raw_prefix + "%",),
        ).fetchall()
    return [int(row[0]) for row in rows]


async def test_monthly_quota_holds_across_gateways(cluster: Cluster) -> None:
    quota, text = 100, "q" * 30  # room for three requests of 30, not a fourth
    raw = make_keys(cluster.env, [("quota", {"monthly_tts_characters": quota}, {})])[
        "quota"
    ]
    outcomes = await asyncio.gather(
        *(tts_outcome(cluster.ws(i % 2, "/v1/tts/ws"), raw, text) for i in range(8))
    )
    charged = tts_characters_charged(cluster.database, "quota-")
    print(f"\nSCALEOUT quota {quota}: {sorted(outcomes)}, charged {charged}")
    assert outcomes.count("complete") == 3, outcomes
    assert outcomes.count("QUOTA_EXCEEDED") == 5, outcomes
    assert sum(charged) == 90 <= quota, charged


# (c) a worker killed: in-flight sessions fail in time, new ones go to the survivor

COMPLETED = "conversation.item.input_audio_transcription.completed"


async def test_worker_killed_new_sessions_go_to_the_survivor(cluster: Cluster) -> None:
    """TTS streams on the killed worker get ``MODEL_NOT_LOADED`` within 5 s; realtime
    sessions on it fail over to a survivor (realtime-asr WK-7) and their item is transcribed;
    new sessions all land on the survivors."""
    raw = make_keys(cluster.env, [("wkill", {}, {})])["wkill"]
    victim = cluster.add_worker("worker-victim")
    for _, port in cluster.gateways:
        wait_ready(port, victim, limit_s=START_S)
    wait_workers_live(cluster, 3)
    # Sessions until the victim holds one of each kind (least-loaded placement prefers
    # the new, empty worker).
    streams: list[Any] = []
    sessions: list[Any] = []
    try:
        while accepted_in(victim, "tts") < 1 or accepted_in(victim, "asr") < 1:
            assert len(streams) < 20, "no session reached the new worker"
            first, ws = await tts_open(cluster.ws(0, "/v1/tts/ws"), raw, "v" * 2000)
            assert first["event"] == "header", first
            streams.append(ws)
            first, ws = await realtime_open(cluster.ws(1, "/v1/realtime"), raw)
            assert first["type"] == "session.created", first
            append = {"type": "input_audio_buffer.append", "audio": b64(silence(1.0))}
            await ws.send(json.dumps(append))
            sessions.append(ws)
        on_victim = {k: accepted_in(victim, k) for k in ("tts", "asr")}
        victim.kill()
        killed = time.monotonic()
        ends = await asyncio.gather(*(tts_end(ws) for ws in streams))
        failed = [at - killed for code, at in ends if code != "complete"]
        codes = sorted({code for code, _ in ends})
        for ws in sessions:
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        transcribed = await asyncio.gather(*(realtime_end(ws) for ws in sessions))
        print(
            f"\nSCALEOUT worker kill -9: on the victim {on_victim}; TTS streams {codes}, "
            f"{len(failed)} failed after {max(failed, default=0):.2f} s; realtime "
            f"sessions {sorted(set(transcribed))}"
        )
        assert len(failed) == on_victim["tts"], ends
        assert codes == ["MODEL_NOT_LOADED", "complete"], codes
        assert max(failed) < SURFACE_S, failed
        assert transcribed == [COMPLETED] * len(sessions), transcribed
        survivors = [w for w in cluster.workers if w is not victim]
        failed_over = sum(
            len(re.findall(r"\basr job \S+\.f1 accepted", w.log.read_text()))
            for w in survivors
        )
        assert failed_over == on_victim["asr"], failed_over
        before = sum(accepted_in(w, "tts") for w in survivors)
        outcomes = await asyncio.gather(
            *(
                tts_outcome(cluster.ws(i % 2, "/v1/tts/ws"), raw, "After the kill.")
                for i in range(6)
            )
        )
        assert outcomes == ["complete"] * 6, outcomes
        assert sum(accepted_in(w, "tts") for w in survivors) - before == 6
    finally:
        for ws in [*streams, *sessions]:
            await ws.close()
        cluster.workers.remove(victim)


async def tts_end(ws: Any) -> tuple[str, float]:
    """How a held TTS stream ended (``complete`` or the error code) and when."""
    while True:
        message = await asyncio.wait_for(ws.recv(), IO_S * 3)
        if isinstance(message, bytes):
            continue
        event = json.loads(message)
        if event["event"] == "error":
            return event["error"]["code"], time.monotonic()
        if event["event"] == "complete":
            return "complete", time.monotonic()


async def realtime_end(ws: Any) -> str:
    """The committed item's outcome: its ``completed`` event type or the error code."""
    while True:
        event = json.loads(await asyncio.wait_for(ws.recv(), IO_S))
        if event["type"] == "error":
            return str(event["error"]["code"])
        if event["type"] in (COMPLETED, COMPLETED.replace("completed", "failed")):
            return str(event["type"])


# (d) a gateway killed: the other one serves, the dead one's records are reaped


def records_by_status(database: str, slug_prefix: str) -> dict[str, int]:
    with psycopg.connect(database) as conn:
        rows = conn.execute(
            "SELECT r.status, count(*) FROM accounts_usagerecord r "
            "JOIN accounts_account a ON a.id = r.account_id "
            "WHERE a.slug LIKE %s GROUP BY r.status",
            (slug_prefix + "%",),
        ).fetchall()
    return {str(status): int(n) for status, n in rows}


async def test_gateway_killed_the_other_serves_and_records_are_reaped(
    cluster: Cluster,
) -> None:
    keys = make_keys(cluster.env, [("gdead", {}, {}), ("glive", {}, {})])
    victim, _ = cluster.add_gateway("gateway-victim")
    doomed = len(cluster.gateways) - 1
    wait_ready(cluster.gateways[doomed][1], victim, limit_s=START_S)
    first, tts = await tts_open(
        cluster.ws(doomed, "/v1/tts/ws"), keys["gdead"], "d" * 5000
    )
    assert first["event"] == "header", first
    first, asr = await realtime_open(cluster.ws(doomed, "/v1/realtime"), keys["gdead"])
    assert first["type"] == "session.created", first
    try:
        assert records_by_status(cluster.database, "gdead-") == {"started": 2}
        victim.kill()
        outcomes = await asyncio.gather(
            *(
                tts_outcome(
                    cluster.ws(i % 2, "/v1/tts/ws"), keys["glive"], "Still here."
                )
                for i in range(4)
            )
        )
        assert outcomes == ["complete"] * 4, outcomes
        # The reaper as beat runs it: the task on a Celery worker, once the dead gateway's
        # records are older than USAGE_STALE_SECONDS.
        queue = f"scaleout-{uuid.uuid4().hex[:8]}"
        stale = {**cluster.env, "USAGE_STALE_SECONDS": "2"}
        celery = start_celery(stale, cluster.tmp / "celery.log", queue)
        sender = Celery(broker=cluster.env["REDIS_URL"])
        deadline = time.monotonic() + START_S
        try:
            while (found := records_by_status(cluster.database, "gdead-")) != {
                "abandoned": 2
            }:
                assert celery.alive(), celery.tail()
                assert time.monotonic() < deadline, (found, celery.tail())
                sender.send_task("accounts.reap_abandoned_usage", queue=queue)
                await asyncio.sleep(1)  # polling interval, not an assertion
        finally:
            celery.stop()
            sender.close()
        reaps = re.findall(
            r"accounts.reap_abandoned_usage\[\S+\] succeeded in \S+: (\d+)",
            celery.log.read_text(),
        )
        statuses = records_by_status(cluster.database, "gdead-")
        live = records_by_status(cluster.database, "glive-")
        print(
            f"\nSCALEOUT gateway kill -9: dead {statuses}, other {live}, "
            f"celery reaps {reaps}"
        )
        assert sum(map(int, reaps)) == 2, reaps
        assert statuses == {"abandoned": 2}, statuses
        assert live == {"completed": 4}, live
    finally:
        for ws in (tts, asr):
            await ws.close()
        cluster.gateways.pop(doomed)
