"""TTS benchmark: TTFB and RTF through the full stack against Piper alone (run by ``make bench``).

Full stack: a WebSocket client (``websockets``) → Daphne (``manage.py rungateway`` as a child
process, embedded topology, a fresh ``DATA_DIR``, a key minted with ``manage.py create_api_key``)
→ the ``/v1/tts/ws`` consumer → the in-memory channel layer → the worker → Piper. Direct: the same
Piper engine (same thread count) called in this process. The same texts at concurrency 1, 4 and
16; each concurrent client sends its requests one after another (a keep-alive stream for the
stack).

* TTFB: request sent → first audio bytes (the stack: first binary frame; direct: first chunk).
* RTF: request sent → last audio (``complete``) ÷ seconds of audio produced.

Both run on the same machine one after the other (direct first), never at the same time.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEXTS = (
    "The quick brown fox jumps over the lazy dog. A journey of a thousand miles "
    "begins with a single step. Please call me back when you have a moment.",
    "Every morning the market opens early, and the vendors set out fresh bread, "
    "fruit and flowers. The first customers arrive before the sun is fully up.",
    "Our order number is one two three. It ships tomorrow, and the courier will "
    "ring the bell twice. Thank you for shopping with us today.",
)
LEVELS = tuple(int(x) for x in os.environ.get("BENCH_LEVELS", "1,4,16").split(","))
REQUESTS = {1: 10, 4: 24, 16: 48}  # per level, spread over its clients
RATE = 16_000  # the protocol's default output rate (the stack resamples 22050 → 16000)


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def summary(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), p95(values)


# Direct: the engine in this process.


async def direct_level(engine: object, level: int) -> tuple[list[float], list[float]]:
    from tts.engines.base import TtsEngineRequest

    ttfb: list[float] = []
    rtf: list[float] = []

    async def client(index: int, count: int) -> None:
        for n in range(count):
            text = TEXTS[(index + n) % len(TEXTS)]
            req = TtsEngineRequest(text=text, voice="joe")
            started = time.perf_counter()
            first, samples = None, 0
            async for chunk in engine.stream(req):  # type: ignore[attr-defined]
                first = first or time.perf_counter()
                samples += len(chunk)
            total = time.perf_counter() - started
            ttfb.append((first or started) - started)
            rtf.append(total / (samples / engine.native_rate))  # type: ignore[attr-defined]

    await run_clients(client, level)
    return ttfb, rtf


async def run_clients(client: object, level: int) -> None:
    total = REQUESTS.get(level, 2 * level)
    shares = [total // level + (1 if i < total % level else 0) for i in range(level)]
    await asyncio.gather(*(client(i, n) for i, n in enumerate(shares)))  # type: ignore[operator]


def measure_direct() -> dict[int, tuple[list[float], list[float]]]:
    from tts.engines.piper import PiperTts

    async def run() -> dict[int, tuple[list[float], list[float]]]:
        engine = PiperTts.load()
        try:
            await direct_level(engine, 1)  # warm-up
            return {level: await direct_level(engine, level) for level in LEVELS}
        finally:
            engine.close()

    return asyncio.run(run())


# Full stack: a Daphne gateway as a child process.


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_env(data_dir: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="veena_site.settings",
        DATA_DIR=data_dir,
        PYTHONPATH=str(ROOT),
        TTS_ENGINE="piper",
        WORKER_KINDS="tts",
        GATEWAY_KINDS="tts",
        LOG_LEVEL="WARNING",
    )
    return env


def manage(*args: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def wait_ready(port: int, proc: subprocess.Popen[bytes], limit_s: float = 90) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"rungateway exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.3)
    raise SystemExit("the gateway was not ready in time")


async def stack_level(
    port: int, key: str, level: int
) -> tuple[list[float], list[float]]:
    import websockets

    ttfb: list[float] = []
    rtf: list[float] = []
    url = f"ws://127.0.0.1:{port}/v1/tts/ws"
    headers = {"Authorization": f"Bearer {key}"}

    async def client(index: int, count: int) -> None:
        async with websockets.connect(url, additional_headers=headers) as ws:
            for n in range(count):
                text = TEXTS[(index + n) % len(TEXTS)]
                request = {"text": text, "format": "pcm", "sample_rate": RATE}
                started = time.perf_counter()
                await ws.send(json.dumps({**request, "keep_alive": True}))
                first, nbytes = None, 0
                while True:
                    message = await ws.recv()
                    if isinstance(message, bytes):
                        first = first or time.perf_counter()
                        nbytes += len(message)
                        continue
                    event = json.loads(message)
                    if event["event"] == "error":
                        raise SystemExit(f"stack error: {event['error']}")
                    if event["event"] == "complete":
                        break
                total = time.perf_counter() - started
                ttfb.append((first or started) - started)
                rtf.append(total / (nbytes / 2 / RATE))

    await run_clients(client, level)
    return ttfb, rtf


def measure_stack() -> dict[int, tuple[list[float], list[float]]]:
    data_dir = tempfile.mkdtemp(prefix="veena-bench-tts-")
    env = child_env(data_dir)
    manage("migrate", "--noinput", env=env)
    key = (
        manage("create_api_key", "--account", "bench", env=env).strip().splitlines()[-1]
    )
    port = free_port()
    log = open(Path(data_dir) / "gateway.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "rungateway", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_ready(port, proc)

        async def run() -> dict[int, tuple[list[float], list[float]]]:
            await stack_level(port, key, 1)  # warm-up
            return {level: await stack_level(port, key, level) for level in LEVELS}

        return asyncio.run(run())
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def main() -> None:
    started = time.monotonic()
    direct = measure_direct()
    stack = measure_stack()
    print(
        f"\nTTS benchmark: Piper en_US-joe-medium, {os.cpu_count()} CPUs, PCM {RATE} Hz"
    )
    print(
        "TTFB in ms; RTF = processing time / audio time; ratio = stack / direct (medians)"
    )
    print(
        f"{'conc':>4} {'n':>3} | {'TTFB stack':>16} {'TTFB direct':>16} {'ratio':>6}"
        f" | {'RTF stack':>14} {'RTF direct':>14} {'ratio':>6}"
    )
    print(f"{'':>8} | {'median / p95':>16} {'median / p95':>16} {'':>6} |")
    rows: list[list[object]] = []
    for level in LEVELS:
        s_ttfb, s_rtf = stack[level]
        d_ttfb, d_rtf = direct[level]
        (s_t50, s_t95), (d_t50, d_t95) = summary(s_ttfb), summary(d_ttfb)
        (s_r50, s_r95), (d_r50, d_r95) = summary(s_rtf), summary(d_rtf)
        print(
            f"{level:>4} {len(s_ttfb):>3} | {s_t50 * 1000:7.0f} / {s_t95 * 1000:6.0f}"
            f" {d_t50 * 1000:7.0f} / {d_t95 * 1000:6.0f} {s_t50 / d_t50:6.2f}"
            f" | {s_r50:6.3f} / {s_r95:5.3f} {d_r50:6.3f} / {d_r95:5.3f}"
            f" {s_r50 / d_r50:6.2f}"
        )
        rows.append([f"conc {level} TTFB stack ÷ direct", s_t50 / d_t50, "ratio"])
        rows.append([f"conc {level} RTF stack ÷ direct", s_r50 / d_r50, "ratio"])
    write_summary("tts", rows)
    print(f"(benchmark took {time.monotonic() - started:.0f} s)")


def write_summary(name: str, rows: list[list[object]]) -> None:
    """``$BENCH_JSON_DIR/<name>.json`` for ``bench/compare.py`` (make bench)."""
    out = os.environ.get("BENCH_JSON_DIR")
    if out:
        (Path(out) / f"{name}.json").write_text(json.dumps({"summary": rows}))


if __name__ == "__main__":
    main()
