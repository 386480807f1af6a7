"""Gateway hop benchmark: the gateway ↔ worker hop over Redis, and streams per gateway process.

One real gateway process (``manage.py rungateway``, Daphne) and two ``gpuworker`` processes
(fake TTS engine) on Redis on loopback; PostgreSQL when it answers at ``BENCH_POSTGRES_URL``
(a fresh database, dropped after), else SQLite. WebSocket clients (``websockets``) in this
process send TTS requests one after another on keep-alive sockets, at rising concurrency.

* Hop: each ``gpu.tts.chunk`` carries the worker's ``sent_at``; the gateway observes
  ``now − sent_at`` into ``veena_channel_hop_seconds`` (heartbeats too, one a second per job).
  p50 / p99 are read from the histogram's buckets (``/metrics`` before and after each level;
  interpolated within a bucket). Targets: p50 ≤ 2 ms, p99 ≤ 10 ms.
* Chunks/s: binary frames the clients received per second of the level, all through the one
  gateway process.
* TTFB: request sent → first audio frame; the knee is the first concurrency whose p99 TTFB is
  more than twice that of one stream.

Levels run back to back in one run; measured under load (the clients, the gateway, both
workers and Redis share this machine's CPUs), so read the ratios.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.cluster import (  # noqa: E402
    REDIS_URL,
    ROOT,
    new_data_dir,
    new_prefix,
    percentile,
    redis_available,
)

from veena_site.conf.registry import child_environment  # noqa: E402

LEVELS = tuple(
    int(x) for x in os.environ.get("BENCH_HOP_LEVELS", "1,4,16,32,64").split(",")
)
LEVEL_S = float(os.environ.get("BENCH_HOP_S", "6"))
CHARS = 300  # 3 s of fake audio in 30 chunks
CHUNK_DELAY_S = 0.02  # the fake engine's pace: 5× real time
POSTGRES_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://127.0.0.1:5432/test")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def postgres_database() -> str | None:
    """A fresh database's URL, or None without PostgreSQL."""
    try:
        import psycopg

        name = f"veena_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=2) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return POSTGRES_URL.rsplit("/", 1)[0] + "/" + name
    except Exception:  # boundary: no PostgreSQL here; SQLite it is
        return None


def drop_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def environment(data_dir: str, prefix: str, database: str | None) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")
    }
    env = child_environment(
        env,
        DJANGO_SETTINGS_MODULE="bench.support.settings",
        PYTHONPATH=str(ROOT),
        DATA_DIR=data_dir,
        REDIS_URL=REDIS_URL,
        CHANNEL_PREFIX=prefix,
        REDIS_KEY_PREFIX=f"{prefix}:",
        TTS_ENGINE="fake",
        ASR_ENGINE="fake",
        WORKER_KINDS="tts",
        GATEWAY_KINDS="tts",
        TTS_WORKER_SLOTS=64,
        FAKE_TTS_CHUNK_DELAY_S=CHUNK_DELAY_S,
        LOG_LEVEL="WARNING",
    )
    if database:
        env["DATABASE_URL"] = database
    return env


def manage(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"manage.py {args[0]} failed: {done.stderr[-2000:]}")
    return done.stdout


MAKE_KEY = """
from accounts.models.plans import Plan
from accounts.services.accounts import account_get_or_create
from accounts.services.api_keys import api_key_create
plan = Plan.objects.create(name="bench", requests_per_minute=10000,
    max_concurrent_streams=1000, max_session_seconds=3600)
account = account_get_or_create(name="bench", plan=plan)
print(api_key_create(account=account, name="bench", actor=None, actor_label="bench")[1])
"""


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def wait_ready(port: int, procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise SystemExit("a gateway or worker process exited during start-up")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit("the deployment was not ready in time")


def hop_buckets(port: int) -> dict[float, float]:
    """Cumulative counts of ``veena_channel_hop_seconds`` by upper bound."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith("veena_channel_hop_seconds_bucket"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[float(bound)] = float(line.rsplit(" ", 1)[1])
    return buckets


def bucket_quantile(before: dict[float, float], after: dict[float, float], q: float):
    """The ``q`` quantile of the observations between two scrapes, interpolated."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1]
    if total <= 0:
        return float("nan"), 0
    rank, lower, below = q * total, 0.0, 0.0
    for bound, cumulative in zip(bounds, counts, strict=True):
        if cumulative >= rank:
            if bound == float("inf"):
                return lower, int(total)
            inside = cumulative - below
            share = (rank - below) / inside if inside else 1.0
            return lower + (bound - lower) * share, int(total)
        lower, below = bound, cumulative
    return lower, int(total)


async def level(port: int, key: str, clients: int, seconds: float) -> dict:
    import websockets

    url = f"ws://127.0.0.1:{port}/v1/tts/ws"
    headers = {"Authorization": f"Bearer {key}"}
    ttfb: list[float] = []
    frames = 0
    errors: dict[str, int] = {}
    stop_at = time.monotonic() + seconds

    async def client() -> None:
        nonlocal frames
        async with websockets.connect(
            url, additional_headers=headers, max_size=None
        ) as ws:
            while time.monotonic() < stop_at:
                request = {"text": "a" * CHARS, "format": "pcm", "keep_alive": True}
                started = time.perf_counter()
                await ws.send(json.dumps(request))
                first = None
                while True:
                    message = await ws.recv()
                    if isinstance(message, bytes):
                        first = first or time.perf_counter()
                        frames += 1
                        continue
                    event = json.loads(message)
                    if event["event"] == "error":
                        code = event["error"]["code"]
                        errors[code] = errors.get(code, 0) + 1
                        return
                    if event["event"] == "complete":
                        break
                if first is not None:
                    ttfb.append(first - started)

    started = time.monotonic()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.monotonic() - started
    return {
        "clients": clients,
        "requests": len(ttfb),
        "ttfb_p50_ms": percentile(ttfb, 50) * 1000 if ttfb else float("nan"),
        "ttfb_p99_ms": percentile(ttfb, 99) * 1000 if ttfb else float("nan"),
        "chunks_per_s": frames / elapsed,
        "errors": errors,
    }


def measure() -> list[dict]:
    """Run every level; the data directory (logs) is removed unless something failed."""
    data_dir, prefix = new_data_dir("hop"), new_prefix("hop")
    database = postgres_database()
    env = environment(data_dir, prefix, database)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        manage("migrate", "--noinput", env=env)
        key = manage("shell", "-c", MAKE_KEY, env=env).strip().splitlines()[-1]
        port = free_port()
        logs = Path(data_dir)
        procs = [
            start(["gpuworker"], env, logs / "worker-0.log"),
            start(["gpuworker"], env, logs / "worker-1.log"),
            start(
                ["rungateway", "--host", "127.0.0.1", "--port", str(port)],
                env,
                logs / "gateway.log",
            ),
        ]
        wait_ready(port, procs)
        asyncio.run(level(port, key, 1, 1.0))  # warm-up
        results = []
        for clients in LEVELS:
            before = hop_buckets(port)
            result = asyncio.run(level(port, key, clients, LEVEL_S))
            after = hop_buckets(port)
            result["hop_p50_ms"] = bucket_quantile(before, after, 0.5)[0] * 1000
            p99, hops = bucket_quantile(before, after, 0.99)
            result["hop_p99_ms"], result["hops"] = p99 * 1000, hops
            results.append(result)
        if not any(r["errors"] for r in results):
            shutil.rmtree(data_dir, ignore_errors=True)
        else:
            print(f"errors: the gateway's and workers' logs are in {data_dir}")
        return results
    finally:
        for proc in reversed(procs):
            stop(proc)
        if database:
            drop_database(database)


def hop(ms: float) -> str:
    """A hop percentile; the histogram's last finite bucket ends at 500 ms."""
    return " >500ms" if ms >= 500 else f"{ms:6.2f}m"


def main() -> None:
    if not redis_available():
        print("hop benchmark skipped: no Redis at BENCH_REDIS_URL")
        return
    started = time.monotonic()
    results = measure()
    base = results[0]["ttfb_p99_ms"]
    knee = next((r["clients"] for r in results if r["ttfb_p99_ms"] > 2 * base), None)
    print(
        "\nGateway hop: one Daphne gateway, two fake-engine workers, Redis on loopback,"
        f" {os.cpu_count()} CPUs (measured under load)"
    )
    print(
        f"{'streams':>7} {'requests':>8} | {'hop p50':>7} {'hop p99':>7} {'hops':>6}"
        f" | {'chunks/s':>8} | {'TTFB p50':>8} {'TTFB p99':>8} {'p99/1':>6} | errors"
    )
    for r in results:
        print(
            f"{r['clients']:>7} {r['requests']:>8} | {hop(r['hop_p50_ms'])}"
            f" {hop(r['hop_p99_ms'])} {r['hops']:>6} | {r['chunks_per_s']:8.0f}"
            f" | {r['ttfb_p50_ms']:7.1f}m {r['ttfb_p99_ms']:7.1f}m"
            f" {r['ttfb_p99_ms'] / base:6.2f} | {r['errors'] or ''}"
        )
    print(
        "hop (m = ms) targets: p50 ≤ 2 ms, p99 ≤ 10 ms. p99 TTFB doubles at "
        + (f"{knee} concurrent streams" if knee else f"> {LEVELS[-1]} streams")
    )
    out = os.environ.get("BENCH_JSON_DIR")
    if out:
        rows = []
        for r in results:
            n = r["clients"]
            rows.append([f"{n} streams hop p50", round(r["hop_p50_ms"], 2), "ms"])
            rows.append([f"{n} streams hop p99", round(r["hop_p99_ms"], 2), "ms"])
            rows.append([f"{n} streams chunks/s", round(r["chunks_per_s"]), "1/s"])
            rows.append(
                [f"{n} streams TTFB p99 ÷ 1 stream", r["ttfb_p99_ms"] / base, "ratio"]
            )
        rows.append(
            ["streams where p99 TTFB doubles", knee or f">{LEVELS[-1]}", "streams"]
        )
        data = {"summary": rows, "levels": results, "ttfb_p99_doubles_at": knee}
        (Path(out) / "hop.json").write_text(json.dumps(data, indent=2))
    print(f"(benchmark took {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
