"""TTS benchmark: first audio, total and RTF through the full stack against Piper alone (``make bench``).

Full stack: a WebSocket client (``websockets``) → Daphne (``manage.py rungateway`` as a child
process, embedded topology, a fresh ``DATA_DIR``, a key on the bench's own plan) → the
``/v1/tts/ws`` consumer → the in-memory channel layer → the worker → Piper. Three gateways run
(``STACKS``): the defaults (a session on every core for a lone stream, one thread each under
load), ``TTS_PIPER_WAIT_FOR_CORES=false``, and ``TTS_PIPER_SESSION_THREADS=1`` (one thread per
stream, as before issue 13).

Direct: Piper itself (``PiperVoice.synthesize``, the same voice) in this process, one thread per
client, with an ONNX session of every core and of one thread; at each level the better of the two
(by median total) is the baseline (with more clients than cores only one thread is tried: more
would oversubscribe by construction).

Levels 1, 2, 4 and 16 clients; each client sends its requests one after another (a keep-alive
stream for the stack), taking turns over three texts of ~150 characters (two or three
sentences); ``BENCH_TTS_TEXT=long``: one ~1000-character text of eleven sentences instead.
Each level runs in ``BENCH_TTS_ROUNDS`` rounds (4) in which the direct runs and the gateways
take turns (the order rotating), so a drift in the machine's speed falls on all of them alike
(in one block each, Piper alone moved 190-230 ms a request from run to run: as much as the gap
measured). ``BENCH_TTS_STACKS`` picks gateways by name (``ALL_STACKS``; also
``stack no spinning``, ``TTS_PIPER_SPINNING=false``, ``stack whole sentences``,
``TTS_PIPER_FIRST_PIECE_FRAMES=0``, and ``plumbing``, the fake engine: what the stack itself costs
a request).

* first audio: request sent → first audio bytes; total: request sent → last audio bytes (as
  the direct side's last chunk); complete ms: request sent → the ``complete`` event after them;
* RTF: total ÷ seconds of audio produced;
* peak RSS: each gateway process (VmHWM) and this process (the direct runs);
* memory: each gateway's VmRSS ``TTS_PIPER_RELEASE_IDLE_S`` + 1.5 s after each level
  (``TTS_PIPER_RETURN_MEMORY`` has released by then) and its VmHWM so far, against a bare
  Piper process that synthesizes the same requests at the same level, measured with its voice
  still loaded (``bench/_tts_footprint.py piper``), plus a bare ``django.setup()`` process
  (``bench/_tts_footprint.py django``); the sum counts the interpreter twice (~10 MiB).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# the baseline speaks the same texts
from bench._tts_footprint import LONG_TEXT, TEXTS, direct_voice  # noqa: E402
from veena_site.conf import decoding  # noqa: E402  (the gateways' defaults)
from veena_site.conf.registry import child_environment  # noqa: E402

LEVELS = tuple(int(x) for x in os.environ.get("BENCH_LEVELS", "1,2,4,16").split(","))
LONG = TEXTS == (LONG_TEXT,)  # BENCH_TTS_TEXT=long
# per level, spread over its clients
REQUESTS = {1: 8, 2: 8, 4: 8, 16: 16} if LONG else {1: 24, 2: 24, 4: 32, 16: 32}
# Each level's requests run in this many rounds, the sides taking turns in each, so a drift
# in the machine's speed (a shared host) falls on every side alike.
ROUNDS = int(os.environ.get("BENCH_TTS_ROUNDS", "4"))
RATE = 16_000  # the protocol's default output rate (the stack resamples 22050 → 16000)
CORES = os.cpu_count() or 1
# name → the settings of that gateway (constants reach it through bench.support.settings)
ALL_STACKS: dict[str, dict[str, object]] = {
    "stack": {},
    "stack overlap": {"TTS_PIPER_WAIT_FOR_CORES": False},
    "stack 1 thread": {"TTS_PIPER_SESSION_THREADS": [1]},
    "stack no spinning": {"TTS_PIPER_SPINNING": False},
    "stack whole sentences": {"TTS_PIPER_FIRST_PIECE_FRAMES": 0},
    "plumbing": {"TTS_ENGINE": "fake"},
}
# BENCH_TTS_STACKS: the gateways to run, by name (comma-separated)
STACKS = {
    name: ALL_STACKS[name]
    for name in os.environ.get(
        "BENCH_TTS_STACKS", "stack,stack overlap,stack 1 thread"
    ).split(",")
}


class BenchError(RuntimeError):
    """A part of the run failed; what was measured before it is still printed."""


@dataclass
class Samples:
    """One side's requests at one level."""

    first: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    rtf: list[float] = field(default_factory=list)
    complete: list[float] = field(
        default_factory=list
    )  # the stack's ``complete`` event
    note: str = ""

    def add(
        self, first: float, total: float, audio_s: float, complete: float | None = None
    ) -> None:
        self.first.append(first)
        self.total.append(total)
        self.rtf.append(total / audio_s)
        if complete is not None:
            self.complete.append(complete)

    def extend(self, other: Samples) -> None:
        self.first += other.first
        self.total += other.total
        self.rtf += other.rtf
        self.complete += other.complete


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def shares(level: int) -> list[int]:
    """Requests per client at ``level`` in one round."""
    total = max(level, REQUESTS.get(level, 2 * level) // ROUNDS)
    return [total // level + (1 if i < total % level else 0) for i in range(level)]


# Direct: Piper itself in this process.


def direct_level(voice: Any, level: int) -> Samples:
    """``level`` threads, each synthesizing its share of requests one after another."""
    samples = Samples()
    rate = voice.config.sample_rate

    def client(index: int, count: int) -> None:
        for n in range(count):
            started = time.perf_counter()
            first, frames = None, 0
            for chunk in voice.synthesize(TEXTS[(index + n) % len(TEXTS)]):
                first = first or time.perf_counter()
                frames += len(chunk.audio_int16_array)
            ended = time.perf_counter()
            samples.add((first or ended) - started, ended - started, frames / rate)

    with ThreadPoolExecutor(level) as pool:
        for future in [pool.submit(client, i, n) for i, n in enumerate(shares(level))]:
            future.result()
    return samples


def direct_threads(voices: dict[int, Any], level: int) -> list[int]:
    """The thread counts tried at ``level`` (all cores only while clients ≤ cores)."""
    return [t for t in sorted(voices, reverse=True) if t == 1 or level <= CORES]


def best_direct(tried: dict[int, Samples]) -> Samples:
    """The better thread count's samples (by median total), named in its note."""
    threads, best = min(tried.items(), key=lambda t: statistics.median(t[1].total))
    best.note = f"{threads} thr"
    return best


# Full stack: Daphne gateways as child processes.


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_env(data_dir: str, overrides: dict[str, object]) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="bench.support.settings",
        DATA_DIR=data_dir,
        PYTHONPATH=str(ROOT),
        TTS_ENGINE="piper",
        WORKER_KINDS="tts",
        GATEWAY_KINDS="tts",
        LOG_LEVEL="WARNING",
    )
    return child_environment(env, **overrides)


def provision(env: dict[str, str]) -> str:
    """Migrate the child's database and mint a key on the bench's own plan (no limits in the way)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "_provision.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1]


def wait_ready(port: int, proc: subprocess.Popen[bytes], limit_s: float = 90) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"rungateway exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.3)
    raise BenchError("the gateway was not ready in time")


@dataclass
class Gateway:
    """One running gateway: its port, key and process."""

    port: int
    key: str
    proc: subprocess.Popen[bytes]

    def peak_rss_mib(self) -> float:
        """The gateway process's peak resident set (VmHWM)."""
        return self.memory_mib().get("peak_mib", math.nan)

    def memory_mib(self) -> dict[str, float]:
        """The gateway process's VmRSS (``rss_mib``) and VmHWM (``peak_mib``)."""
        from bench._tts_footprint import memory_mib

        return memory_mib(self.proc.pid)


def footprint(*args: str) -> dict[str, float]:
    """A baseline process's memory (``bench/_tts_footprint.py``)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "_tts_footprint.py"), *args],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "bench.support.settings"},
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


@contextmanager
def gateway(overrides: dict[str, object]) -> Iterator[Gateway]:
    """Start a TTS-only gateway with ``overrides`` to its environment."""
    data_dir = tempfile.mkdtemp(prefix="veena-bench-tts-")
    env = child_env(data_dir, overrides)
    key = provision(env)
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
        yield Gateway(port, key, proc)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


async def stack_request(ws: Any, text: str, samples: Samples) -> None:
    """One keep-alive request on an open socket."""
    request = {"text": text, "format": "pcm", "sample_rate": RATE, "keep_alive": True}
    started = time.perf_counter()
    await ws.send(json.dumps(request))
    first, last, nbytes = None, None, 0
    while True:
        message = await ws.recv()
        if isinstance(message, bytes):
            last = time.perf_counter()
            first = first or last
            nbytes += len(message)
            continue
        event = json.loads(message)
        if event["event"] == "error":
            raise BenchError(f"stack error: {event['error']}")
        if event["event"] == "complete":
            break
    completed = time.perf_counter()
    ended = last or completed  # the last audio byte, as Piper's last chunk
    samples.add(
        (first or ended) - started,
        ended - started,
        nbytes / 2 / RATE,
        completed - started,
    )


async def stack_level_async(gw: Gateway, level: int) -> Samples:
    import websockets

    samples = Samples()
    url = f"ws://127.0.0.1:{gw.port}/v1/tts/ws"
    headers = {"Authorization": f"Bearer {gw.key}"}

    async def client(index: int, count: int) -> None:
        async with websockets.connect(url, additional_headers=headers) as ws:
            for n in range(count):
                await stack_request(ws, TEXTS[(index + n) % len(TEXTS)], samples)

    await asyncio.gather(*(client(i, n) for i, n in enumerate(shares(level))))
    return samples


def stack_level(gw: Gateway, level: int) -> Samples:
    return asyncio.run(stack_level_async(gw, level))


# The run and its table.


def attempt(label: str, errors: list[str], measure: Callable[[], Any]) -> Any:
    """Run one measurement; a failure is noted in ``errors`` and yields None."""
    try:
        return measure()
    except Exception as exc:  # boundary: one bench part, reported at the end
        errors.append(f"{label}: {type(exc).__name__}: {exc}")
        return None


# After a level, before a gateway's VmRSS: its memory release has run.
IDLE_WAIT_S = decoding.TTS_PIPER_RELEASE_IDLE_S + 1.5


def measure(
    errors: list[str],
    gateways: dict[str, Gateway],
    memory: dict[int, dict[str, dict[str, float]]],
) -> dict[int, dict[str, Samples]]:
    """Every level: direct and each gateway, taking turns; ``memory``: each gateway's after it."""
    voices = {CORES: direct_voice(CORES), 1: direct_voice(1)} if CORES > 1 else {}
    voices = voices or {1: direct_voice(1)}
    sides: dict[str, Callable[[int], Samples]] = {
        f"direct {t}": lambda level, v=voice: direct_level(v, level)  # type: ignore[misc]
        for t, voice in voices.items()
    }
    for name, gw in gateways.items():
        sides[name] = lambda level, gw=gw: stack_level(gw, level)  # type: ignore[misc]
    for name, run in sides.items():  # warm-up
        attempt(f"{name} warm-up", errors, lambda run=run: run(1))  # type: ignore[misc]
    results: dict[int, dict[str, Samples]] = {}
    names = list(sides)
    direct_names = {f"direct {t}": t for t in voices}  # side name → thread count
    for level in LEVELS:
        got: dict[str, Samples] = {}
        wanted = [n for n in names if n not in direct_names] + [
            f"direct {t}" for t in direct_threads(voices, level)
        ]
        for turn in range(ROUNDS):
            shift = (turn + level) % len(wanted)
            for name in wanted[shift:] + wanted[:shift]:
                samples = attempt(
                    f"{name} {level}",
                    errors,
                    lambda: sides[name](level),  # noqa: B023
                )
                if samples is not None:
                    got.setdefault(name, Samples()).extend(samples)
        direct = {direct_names[n]: got.pop(n) for n in list(got) if n in direct_names}
        results[level] = ({"direct": best_direct(direct)} if direct else {}) | got
        memory[level] = {}
        if gateways:
            time.sleep(IDLE_WAIT_S)
        for name, gw in gateways.items():
            memory[level][name] = gw.memory_mib()
    return results


def baselines(
    errors: list[str], memory: dict[int, dict[str, dict[str, float]]]
) -> None:
    """Add Piper alone at each level and Django alone to ``memory``."""
    django = attempt("django baseline", errors, lambda: footprint("django"))
    for level, row in memory.items():
        count = str(sum(shares(level)) * ROUNDS)
        piper = attempt(
            f"piper baseline {level}",
            errors,
            lambda: footprint("piper", str(level), count),  # noqa: B023
        )
        if piper and django:
            row["piper alone"] = piper
            row["piper + django"] = {
                k: piper[k] + django[k] for k in ("rss_mib", "peak_mib")
            }


def memory_table(memory: dict[int, dict[str, dict[str, float]]]) -> None:
    """One row per level and process: MiB after the level and peak, ÷ Piper + Django."""
    print(
        "| clients | process | RSS after MiB | peak MiB | ÷ piper+django: after | peak |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    for level, row in memory.items():
        base = row.get("piper + django")
        for name, m in row.items():
            ratios = [
                f"{m[k] / base[k]:.2f}" if base else "—"
                for k in ("rss_mib", "peak_mib")
            ]
            print(
                f"| {level} | {name} | {m['rss_mib']:.0f} | {m['peak_mib']:.0f} | "
                + " | ".join(ratios)
                + " |"
            )


def cell(values: list[float], scale: float, fmt: str) -> str:
    return f"{statistics.median(values) * scale:{fmt}} / {p95(values) * scale:{fmt}}"


def table(results: dict[int, dict[str, Samples]]) -> None:
    """One row per level and side: medians / p95, and ratios to direct (medians)."""
    print(
        "| clients | side | n | first audio ms | total ms | RTF | ÷ direct: first | total | RTF "
        "| complete ms |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for level, sides in results.items():
        direct = sides.get("direct")
        for name, s in sides.items():
            label = f"{name} ({s.note})" if s.note else name
            cells = [
                str(level),
                label,
                str(len(s.total)),
                cell(s.first, 1000, ".0f"),
                cell(s.total, 1000, ".0f"),
                cell(s.rtf, 1, ".3f"),
            ]
            for metric in ("first", "total", "rtf"):
                ours, base = getattr(s, metric), getattr(direct, metric, None)
                ratio = (
                    statistics.median(ours) / statistics.median(base) if base else None
                )
                cells.append(f"{ratio:.2f}" if ratio else "—")
            cells.append(cell(s.complete, 1000, ".0f") if s.complete else "—")
            print("| " + " | ".join(cells) + " |")


def summary_rows(results: dict[int, dict[str, Samples]]) -> list[list[object]]:
    """The combined table's rows (bench/compare.py): each gateway ÷ direct, medians."""
    rows: list[list[object]] = []
    for level, sides in results.items():
        direct = sides.get("direct")
        for name, s in sides.items():
            if name == "direct" or direct is None or not s.total or not direct.total:
                continue
            for metric, label in (("first", "first audio"), ("rtf", "RTF")):
                ratio = statistics.median(getattr(s, metric)) / statistics.median(
                    getattr(direct, metric)
                )
                rows.append(
                    [f"{level} clients {label} {name} ÷ direct", ratio, "ratio"]
                )
    return rows


def main() -> None:
    started = time.monotonic()
    errors: list[str] = []
    results: dict[int, dict[str, Samples]] = {}
    rss: dict[str, float] = {}
    memory: dict[int, dict[str, dict[str, float]]] = {}
    with ExitStack() as stack:
        gateways = {}
        for name, overrides in STACKS.items():
            gw = attempt(
                f"{name} start",
                errors,
                lambda t=overrides: stack.enter_context(gateway(t)),
            )  # type: ignore[misc]
            if gw is not None:
                gateways[name] = gw
        results = (
            attempt("run", errors, lambda: measure(errors, gateways, memory)) or {}
        )
        rss = {name: gw.peak_rss_mib() for name, gw in gateways.items()}
    rss["direct (this process)"] = (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    )
    baselines(errors, memory)
    print(
        f"\nTTS benchmark (measured under load: the CPUs are shared): Piper en_US-joe-medium, "
        f"{CORES} CPUs, PCM {RATE} Hz; median / p95; ratios of medians; "
        + (
            f"one {len(LONG_TEXT)}-character text"
            if LONG
            else "three 150-character texts"
        )
    )
    print(
        "stack: the defaults (all cores alone, one each under load); stack overlap: "
        "TTS_PIPER_WAIT_FOR_CORES=false; stack 1 thread: TTS_PIPER_SESSION_THREADS=1 "
        "(one thread per stream, as before issue 13)"
    )
    table(results)
    write_summary("tts", summary_rows(results))
    print("peak RSS: " + ", ".join(f"{k} {v:.0f} MiB" for k, v in rss.items()))
    memory_table(memory)
    print(f"(benchmark took {time.monotonic() - started:.0f} s)")
    for error in errors:
        print(f"FAILED {error}")
    if errors:
        sys.exit(1)


def write_summary(name: str, rows: list[list[object]]) -> None:
    """``$BENCH_JSON_DIR/<name>.json`` for ``bench/compare.py`` (make bench)."""
    out = os.environ.get("BENCH_JSON_DIR")
    if out:
        (Path(out) / f"{name}.json").write_text(json.dumps({"summary": rows}))


if __name__ == "__main__":
    main()
