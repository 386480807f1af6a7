"""Soak harness: N concurrent sockets for T seconds, TTS and realtime mixed (issue 17).

Against a running deployment (``--url`` and ``--key``; ``--pid`` names its top process for RSS),
or, by default, against an embedded ``manage.py serve`` this script starts in a fresh data
directory with the fake engines (``--real-engines``: the configured Piper and faster-whisper).
The embedded run provisions its own plan and key (``bench/_provision.py``) before it starts.

Each socket loops until the time is up, pausing ``--think`` seconds (mean, ±50 %) between
requests:

* TTS (``/v1/tts/ws``, ``keep_alive``, ``timestamps``, PCM at the native rate): every request's
  binary frames are checked against the sequence information the protocol gives the client:
  ``segment_start``/``segment_end`` ``seq`` (0, 1, 2, … with frames only inside a segment),
  every ``progress`` (``chunks_sent``/``bytes_sent`` equal to what arrived so far) and
  ``complete.metrics`` (``chunks_sent``, ``total_bytes``). Fewer frames than the server counted are
  *lost*, more are *duplicated*; a frame outside its segment, a segment ``seq`` out of turn, a
  ``progress`` count going backwards, or an empty or odd-length frame is *out of order*. With the
  fake engine the byte total must also be exactly the tone's length for the text (10 ms a
  character), so a frame lost or repeated between two ``progress`` events cannot cancel out.
* Realtime (``/v1/realtime``): appends 2 s of audio, commits, waits for the transcript (the fake
  engine's is known exactly, with ``ASR_TRIM_NONSPEECH`` off for the tone: a wrong one counts as
  ``WRONG_TRANSCRIPT``).

Reported per 10 s window (``--window``): requests, TTFB p50/p99 (TTS request sent → first frame;
realtime commit → completed), errors (the capacity refusals ``STREAMING_OVERLOADED`` and
``too_many_sessions`` apart: more sockets than slots), and the RSS of every process of the deployment (the server
process and its descendants, read from ``/proc``). ``--json PATH`` writes everything; with
``BENCH_JSON_DIR`` set (``make bench``) a ``soak.json`` with a ``summary`` list is written there.
Modest defaults under ``make bench``: 20 sockets × 30 s (``BENCH_SOAK_SOCKETS``,
``BENCH_SOAK_S``). Numbers are measured under load: the clients share the machine's CPUs with the
server.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from veena_site.conf.registry import child_environment  # noqa: E402

FAKE_RATE = 22_050  # the fake TTS engine's native rate
FAKE_MS_PER_CHAR = 10
REALTIME_RATE = 24_000
REALTIME_SECONDS = 2
# The protocols' answer to more sockets than worker slots (close 1013, retry later): counted
# and printed apart from the errors, which fail the run.
CAPACITY_CODES = frozenset(("STREAMING_OVERLOADED", "too_many_sessions"))
FAKE_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")
TEXTS = (
    "The quick brown fox jumps over the lazy dog near the river bank today.",
    "Soak tests keep many sockets open for minutes and count every frame sent.",
    "One two three four five six seven eight nine ten eleven twelve thirteen.",
)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0–100); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass
class Window:
    """What happened in one reporting window."""

    tts_ttfb: list[float] = field(default_factory=list)
    rt_latency: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    rss: dict[str, int] = field(default_factory=dict)


@dataclass
class Tally:
    """The whole run's counters, and its windows."""

    started: float
    window_s: float
    fake: bool
    last_window: int = 1_000_000
    think_s: float = 0.3  # mean pause between a socket's requests
    windows: list[Window] = field(default_factory=list)
    tts_requests: int = 0
    rt_sessions: int = 0
    frames: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    messages: dict[str, str] = field(default_factory=dict)  # the first of each code

    def window(self) -> Window:
        """The window now; what ends after the run's last window counts in that one."""
        index = int((time.monotonic() - self.started) // self.window_s)
        index = min(index, self.last_window)
        while len(self.windows) <= index:
            self.windows.append(Window())
        return self.windows[index]

    def error(self, code: str, message: str = "") -> None:
        self.errors[code] += 1
        self.window().errors[code] += 1
        self.messages.setdefault(code, message)


def count_mismatch(tally: Tally, received: int, counted: int) -> bool:
    """Frames the server counted vs frames that arrived: lost or duplicated (True if any)."""
    if received < counted:
        tally.lost += counted - received
    elif received > counted:
        tally.duplicated += received - counted
    return received != counted


async def tts_request(ws: Any, tally: Tally, text: str) -> bool:
    """One keep-alive TTS request with every frame checked; False when the socket is done."""
    request = {
        "text": text,
        "format": "pcm",
        "sample_rate": FAKE_RATE if tally.fake else 22_050,
        "keep_alive": True,
        "timestamps": True,
    }
    sent = time.perf_counter()
    await ws.send(json.dumps(request))
    frames = size = 0
    first: float | None = None
    segment: int | None = None  # the open segment's seq
    next_seq = 0
    last_progress = 0
    mismatched = False  # a loss or repeat is already counted for this request
    while True:
        message = await asyncio.wait_for(ws.recv(), timeout=60)
        if isinstance(message, bytes):
            first = first or time.perf_counter()
            frames += 1
            size += len(message)
            if segment is None or not message or len(message) % 2:
                tally.out_of_order += 1
            continue
        event = json.loads(message)
        kind = event.get("event")
        if kind == "segment_start":
            if segment is not None or event.get("seq") != next_seq:
                tally.out_of_order += 1
            segment = event.get("seq")
        elif kind == "segment_end":
            if segment is None or event.get("seq") != segment:
                tally.out_of_order += 1
            segment, next_seq = None, next_seq + 1
        elif kind == "progress":
            counted = int(event.get("chunks_sent", 0))
            if counted < last_progress:
                tally.out_of_order += 1
            last_progress = counted
            mismatched |= count_mismatch(tally, frames, counted)
            frames = counted  # count each loss or repeat once, not again at complete
        elif kind == "error":
            error = event.get("error", {})
            tally.error(
                str(error.get("code", "UNKNOWN")), str(error.get("message", ""))
            )
            return not error.get("fatal", True)
        elif kind == "complete":
            metrics = event.get("metrics", {})
            mismatched |= count_mismatch(
                tally, frames, int(metrics.get("chunks_sent", 0))
            )
            if int(metrics.get("total_bytes", -1)) != size and not mismatched:
                tally.error("BYTES_MISMATCH")
            if tally.fake:
                samples = FAKE_RATE * FAKE_MS_PER_CHAR * len(text) // 1000
                if size != samples * 2 and not mismatched:
                    tally.error("FAKE_AUDIO_LENGTH")
            if segment is not None:
                tally.out_of_order += 1
            tally.tts_requests += 1
            tally.frames += frames
            if first is not None:
                tally.window().tts_ttfb.append(first - sent)
            return True


async def keep_connected(
    url: str, key: str, tally: Tally, stop_at: float, serve: Any
) -> None:
    """Connect to ``url``, run ``await serve(ws)`` on the socket, and connect again after a
    1 s back-off until ``stop_at``; a client-side failure is tallied as an error."""
    import websockets

    headers = {"Authorization": f"Bearer {key}"}
    while time.monotonic() < stop_at:
        try:
            async with websockets.connect(
                url, additional_headers=headers, max_size=None
            ) as ws:
                await serve(ws)
        except (TimeoutError, OSError) as exc:
            tally.error(f"CLIENT_{type(exc).__name__}")
        except websockets.ConnectionClosed as exc:
            tally.error(f"CLOSED_{exc.rcvd.code if exc.rcvd else 'NONE'}")
        if time.monotonic() < stop_at:  # it ended in an error: back off, reconnect
            await asyncio.sleep(1)


async def think(tally: Tally) -> None:
    """The pause between two requests of one socket."""
    await asyncio.sleep(random.uniform(0.5, 1.5) * tally.think_s)


async def tts_socket(url: str, key: str, tally: Tally, stop_at: float) -> None:
    async def serve(ws: Any) -> None:
        while time.monotonic() < stop_at:
            if not await tts_request(ws, tally, random.choice(TEXTS)):
                return
            await think(tally)

    await keep_connected(url + "/v1/tts/ws", key, tally, stop_at, serve)


def tone_pcm(seconds: int) -> bytes:
    """``seconds`` of a 300 Hz tone at 24 kHz, s16le."""
    import numpy as np

    t = np.arange(REALTIME_RATE * seconds) / REALTIME_RATE
    return (np.sin(2 * np.pi * 300 * t) * 12000).astype("<i2").tobytes()


async def realtime_session(ws: Any, tally: Tally, pcm: bytes) -> bool:
    """Append, commit, wait for the transcript; False when the socket is done."""
    step = REALTIME_RATE // 5 * 2  # 200 ms
    for i in range(0, len(pcm), step):
        chunk = base64.b64encode(pcm[i : i + step]).decode()
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
        await asyncio.sleep(0.05)
    committed = time.perf_counter()
    await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
    while True:
        event = json.loads(await asyncio.wait_for(ws.recv(), timeout=60))
        kind = event.get("type", "")
        if kind == "error":
            error = event.get("error", {})
            tally.error(
                str(error.get("code") or "UNKNOWN"), str(error.get("message", ""))
            )
            return False
        if kind.endswith("input_audio_transcription.completed"):
            expected = " ".join(FAKE_WORDS[:REALTIME_SECONDS])
            if tally.fake and event.get("transcript", "").strip() != expected:
                tally.error("WRONG_TRANSCRIPT")
            tally.rt_sessions += 1
            tally.window().rt_latency.append(time.perf_counter() - committed)
            return True


async def realtime_socket(url: str, key: str, tally: Tally, stop_at: float) -> None:
    pcm = tone_pcm(REALTIME_SECONDS)

    async def serve(ws: Any) -> None:
        created = json.loads(await asyncio.wait_for(ws.recv(), timeout=30))
        if created.get("type") != "session.created":
            error = created.get("error", {})
            tally.error(
                str(error.get("code") or "NO_SESSION"), str(error.get("message", ""))
            )
            return
        while time.monotonic() < stop_at:
            if not await realtime_session(ws, tally, pcm):
                return
            await think(tally)

    await keep_connected(url + "/v1/realtime", key, tally, stop_at, serve)


def process_tree(root: int) -> list[int]:
    """``root`` and every descendant, from ``/proc/*/stat``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def rss_by_process(root: int) -> dict[str, int]:
    """RSS in KiB of every process in ``root``'s tree, keyed ``pid:name``."""
    out: dict[str, int] = {}
    for pid in process_tree(root):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        rss = next(
            (int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS:")),
            0,
        )
        words = [w.decode(errors="replace") for w in cmd if w]
        name = next(
            (w for w in words[1:] if not w.startswith("-") and "/" not in w),
            Path(words[0]).name if words else "?",
        )
        if "manage.py" in " ".join(words) and len(words) > 2:
            name = words[2]
        out[f"{pid}:{name}"] = rss
    return out


async def sample_rss(pid: int | None, tally: Tally, stop_at: float) -> None:
    while time.monotonic() < stop_at:
        if pid:
            tally.window().rss = rss_by_process(pid)
        await asyncio.sleep(min(1.0, tally.window_s / 2))


async def soak(
    url: str,
    key: str,
    sockets: int,
    seconds: float,
    share: float,
    tally: Tally,
    pid: int | None,
) -> None:
    stop_at = time.monotonic() + seconds
    realtime = round(sockets * share)
    tasks = [realtime_socket(url, key, tally, stop_at) for _ in range(realtime)]
    tasks += [tts_socket(url, key, tally, stop_at) for _ in range(sockets - realtime)]
    await asyncio.gather(sample_rss(pid, tally, stop_at), *tasks)


# --- the embedded deployment -------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def embedded_env(data_dir: str, real: bool) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("REDIS_URL", "DATABASE_URL", "BENCH_JSON_DIR")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="bench.support.settings",
        PYTHONPATH=str(ROOT),
        DATA_DIR=data_dir,
        LOG_LEVEL="WARNING",
    )
    if real:
        env.pop("TTS_ENGINE", None)
        env.pop("ASR_ENGINE", None)
        return env
    # The test tone is no speech to the VAD; untrimmed, the fake ASR's transcript is exact.
    return child_environment(
        env,
        TTS_ENGINE="fake",
        ASR_ENGINE="fake",
        FAKE_TTS_CHUNK_DELAY_S=0.02,
        ASR_TRIM_NONSPEECH=False,
    )


def start_embedded(
    data_dir: str, real: bool
) -> tuple[subprocess.Popen[bytes], str, str]:
    """Provision a key, start ``manage.py serve``; the process, its URL and the key."""
    env = embedded_env(data_dir, real)
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "_provision.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"provisioning failed: {done.stderr[-2000:]}")
    key = done.stdout.strip().splitlines()[-1]
    port = free_port()
    log = open(Path(data_dir) / "serve.log", "wb")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(
                "serve exited:\n" + (Path(data_dir) / "serve.log").read_text()[-3000:]
            )
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2):
                return proc, "ws://127.0.0.1:" + str(port), key
        except OSError:
            time.sleep(0.3)
    stop(proc)
    raise SystemExit("serve was not ready within 120 s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# --- report ------------------------------------------------------------------------------


def capacity(errors: dict[str, int]) -> dict[str, int]:
    return {code: n for code, n in errors.items() if code in CAPACITY_CODES}


def faults(errors: dict[str, int]) -> dict[str, int]:
    """The errors that are not the protocol's answer to more sockets than slots."""
    return {code: n for code, n in errors.items() if code not in CAPACITY_CODES}


def report(tally: Tally, sockets: int, seconds: float) -> dict[str, Any]:
    windows = []
    for i, w in enumerate(tally.windows):
        windows.append(
            {
                "t_s": round(i * tally.window_s),
                "tts_requests": len(w.tts_ttfb),
                "tts_ttfb_p50_ms": percentile(w.tts_ttfb, 50) * 1000,
                "tts_ttfb_p99_ms": percentile(w.tts_ttfb, 99) * 1000,
                "rt_sessions": len(w.rt_latency),
                "rt_latency_p50_ms": percentile(w.rt_latency, 50) * 1000,
                "rt_latency_p99_ms": percentile(w.rt_latency, 99) * 1000,
                "errors": dict(w.errors),
                "rss_kib": w.rss,
                "rss_total_kib": sum(w.rss.values()),
            }
        )
    totals = [sum(w.rss.values()) for w in tally.windows if w.rss]
    # Warm-up: the first window loads engines and fills caches; growth is second → last.
    base = totals[1] if len(totals) > 2 else (totals[0] if totals else 0)
    growth = totals[-1] / base if base else float("nan")
    return {
        "sockets": sockets,
        "seconds": seconds,
        "tts_requests": tally.tts_requests,
        "rt_sessions": tally.rt_sessions,
        "frames": tally.frames,
        "lost": tally.lost,
        "duplicated": tally.duplicated,
        "out_of_order": tally.out_of_order,
        "errors": dict(tally.errors),
        "faults": faults(tally.errors),
        "error_messages": tally.messages,
        "rss_growth": growth,
        "windows": windows,
    }


def nan(x: float, fmt: str) -> str:
    """``x`` formatted, or a dash as wide for NaN (no requests in the window)."""
    return f"{'-':>{int(fmt.split('.')[0] or 0)}}" if math.isnan(x) else format(x, fmt)


def print_report(result: dict[str, Any]) -> None:
    print(
        f"\nSoak: {result['sockets']} sockets × {result['seconds']:.0f} s, "
        f"{os.cpu_count()} CPUs (measured under load)"
    )
    print(
        f"{'t s':>5} {'tts':>5} {'p50 ms':>7} {'p99 ms':>7} | {'rt':>4} {'p50 ms':>7}"
        f" {'p99 ms':>7} | {'RSS MiB':>8} | errors"
    )
    for w in result["windows"]:
        print(
            f"{w['t_s']:>5} {w['tts_requests']:>5} {nan(w['tts_ttfb_p50_ms'], '7.1f')}"
            f" {nan(w['tts_ttfb_p99_ms'], '7.1f')} | {w['rt_sessions']:>4}"
            f" {nan(w['rt_latency_p50_ms'], '7.1f')} {nan(w['rt_latency_p99_ms'], '7.1f')}"
            f" | {w['rss_total_kib'] / 1024:8.1f} | {w['errors'] or ''}"
        )
    if result["windows"] and result["windows"][-1]["rss_kib"]:
        print(
            "RSS by process (last window, MiB): "
            + ", ".join(
                f"{k} {v / 1024:.1f}"
                for k, v in result["windows"][-1]["rss_kib"].items()
            )
        )
    print(
        f"TTS requests {result['tts_requests']}, frames {result['frames']}, realtime"
        f" sessions {result['rt_sessions']}; lost {result['lost']}, duplicated"
        f" {result['duplicated']}, out of order {result['out_of_order']}; refused"
        f" for capacity {capacity(result['errors']) or 'none'}; other errors"
        f" {result['faults'] or 'none'}; RSS last ÷ after warm-up"
        f" {nan(result['rss_growth'], '.3f')}"
    )


def summary_rows(result: dict[str, Any]) -> list[list[Any]]:
    windows = [w for w in result["windows"] if w["tts_requests"]] or [
        {"tts_ttfb_p99_ms": float("nan")}
    ]
    first, last = (windows[1] if len(windows) > 2 else windows[0]), windows[-1]
    return [
        [
            "soak lost + duplicated + out-of-order chunks",
            result["lost"] + result["duplicated"] + result["out_of_order"],
            "chunks",
        ],
        ["soak errors (not capacity)", sum(result["faults"].values()), "errors"],
        ["soak refused for capacity", sum(capacity(result["errors"]).values()), "n"],
        ["soak TTS requests/s", result["tts_requests"] / result["seconds"], "1/s"],
        [
            "soak TTFB p99 last window ÷ after warm-up",
            last["tts_ttfb_p99_ms"] / first["tts_ttfb_p99_ms"],
            "ratio",
        ],
        ["soak RSS last window ÷ after warm-up", result["rss_growth"], "ratio"],
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="ws(s)://host:port of a running deployment")
    parser.add_argument("--key", help="API key for --url")
    parser.add_argument(
        "--pid", type=int, help="top process of --url's deployment (RSS)"
    )
    parser.add_argument(
        "--real-engines", action="store_true", help="embedded: real engines"
    )
    parser.add_argument(
        "--sockets", type=int, default=int(os.environ.get("BENCH_SOAK_SOCKETS", "20"))
    )
    parser.add_argument(
        "--seconds", type=float, default=float(os.environ.get("BENCH_SOAK_S", "30"))
    )
    parser.add_argument("--realtime-share", type=float, default=0.25)
    parser.add_argument(
        "--think", type=float, default=0.3, help="mean seconds between requests"
    )
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--json", help="write the full result here")
    args = parser.parse_args()
    if bool(args.url) != bool(args.key):
        parser.error("--url and --key go together")
    started = time.monotonic()
    proc, data_dir = None, None
    if args.url:
        url, key, pid = args.url.rstrip("/"), args.key, args.pid
    else:
        data_dir = tempfile.mkdtemp(prefix="veena-soak-")
        proc, url, key = start_embedded(data_dir, args.real_engines)
        pid = proc.pid
    fake = not args.url and not args.real_engines
    tally = Tally(
        started=time.monotonic(),
        window_s=args.window,
        fake=fake,
        last_window=max(0, math.ceil(args.seconds / args.window) - 1),
        think_s=args.think,
    )
    try:
        asyncio.run(
            soak(url, key, args.sockets, args.seconds, args.realtime_share, tally, pid)
        )
    finally:
        if proc:
            stop(proc)
    result = report(tally, args.sockets, args.seconds)
    print_report(result)
    for code, message in result["error_messages"].items():
        print(f"first {code}: {message}")
    bad = (
        result["lost"]
        or result["duplicated"]
        or result["out_of_order"]
        or faults(result["errors"])
    )
    if data_dir:
        if bad:
            print(f"problems: the server's log is in {data_dir}/serve.log")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    out = os.environ.get("BENCH_JSON_DIR")
    if out:
        data = {"summary": summary_rows(result), "result": result}
        (Path(out) / "soak.json").write_text(json.dumps(data, indent=2))
    print(f"(soak took {time.monotonic() - started:.0f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
