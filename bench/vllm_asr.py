"""Whisper on vLLM against faster-whisper, through the realtime stack and alone (``make bench``).

One process, embedded topology (the ``/v1/realtime`` consumer, the in-memory channel layer and
the worker consumer), both engines loaded side by side; between rounds the worker's ASR engine is
switched, so both stacks see the same machine load. Each session streams Piper speech at 24 kHz
in 100 ms appends in real time, then commits (bench/asr.py's session). Per concurrency level
(1, 4 and 8 by default) and engine:

* commit → ``completed`` and first append → first delta through the stack;
* the same audio decoded by the engine directly at the same concurrency (after as long an idle
  time as a session streams), and the ratios stack ÷ engine and vLLM ÷ faster-whisper;
* the largest batch vLLM ran in one engine step (its own step statistics).

Then finals before chunk decodes, on the vLLM engine alone: a final decode alone; with 7 chunk
decodes requested while it runs (held back until it ends); arriving while 7 chunk decodes run
(vLLM's priority policy schedules it first); arriving while 7 decodes of equal priority run.
Last, the peak RSS of the process tree (this process, vLLM's engine core and its worker).

``--model PATH`` serves a local Hugging Face Whisper checkpoint (on a CUDA machine e.g.
whisper-large-v3-turbo with ``make vllm VLLM_REQUIREMENTS=requirements-vllm-gpu.txt``); without
it the bundled tiny.en is converted into a temporary DATA_DIR. ``BENCH_LEVELS`` and
``BENCH_ROUNDS`` (sessions per level, default 8) narrow or lengthen the run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.asr import api_key, configure, direct, session, speech  # noqa: E402

ENGINES = ("faster-whisper", "vllm")
PRIORITY_CROWD = 7  # chunk decodes in flight when the final decode arrives


class TreeRss:
    """Samples the RSS of this process and its descendants; keeps the peaks."""

    def __init__(self, period_s: float = 0.5) -> None:
        self.period_s = period_s
        self.peak_total = 0
        self.peak_by_name: dict[str, int] = defaultdict(int)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> dict[int, tuple[str, int]]:
        """pid → (name, RSS bytes) of the tree rooted at this process."""
        parents: dict[int, int] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(stat.parent.name)] = int(fields[1])
        tree, frontier = {os.getpid()}, [os.getpid()]
        while frontier:
            pid = frontier.pop()
            children = [c for c, p in parents.items() if p == pid]
            tree.update(children)
            frontier += children
        out = {}
        for pid in tree:
            try:
                status = Path(f"/proc/{pid}/status").read_text().splitlines()
                name = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            rss = next((int(x.split()[1]) for x in status if x.startswith("VmRSS")), 0)
            label = name.decode(errors="replace").rsplit("/", 1)[-1] or str(pid)
            out[pid] = (label, rss * 1024)
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            sample = self.sample()
            self.peak_total = max(self.peak_total, sum(r for _, r in sample.values()))
            for name, rss in sample.values():
                self.peak_by_name[name] = max(self.peak_by_name[name], rss)
            self._stop.wait(self.period_s)


@dataclass
class Cell:
    """One engine at one concurrency level."""

    completed: list[float] = field(default_factory=list)
    first_delta: list[float] = field(default_factory=list)
    alone: list[float] = field(default_factory=list)
    max_batch: int = 0


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def run_round(
    runtime: Any,
    engines: dict[str, Any],
    key: str,
    pcm: bytes,
    audio: Any,
    level: int,
    n: int,
    cells: dict[tuple[str, int], Cell],
) -> None:
    """Both stacks and both engines alone, in an order that alternates per round."""
    order = ENGINES if n % 2 == 0 else ENGINES[::-1]
    for name in order:
        engine, cell = engines[name], cells[(name, level)]
        runtime.engines["asr"].engine = engine  # new sessions go to this engine
        mark = engine.runner.stats.steps if name == "vllm" else 0
        results = await asyncio.gather(*(session(key, pcm) for _ in range(level)))
        cell.completed += [r["latency"] for r in results]
        cell.first_delta += [r["first_delta"] for r in results if r["first_delta"]]
        if name == "vllm":
            steps = engine.runner.stats.since(mark)
            cell.max_batch = max([cell.max_batch, *(s.batch for s in steps)])
    for name in order:
        cells[(name, level)].alone += await direct(engines[name], audio, level)


async def final_with_crowd(
    engine: Any, audio: Any, *, crowd_first: bool, background: bool
) -> float:
    """One final decode's latency with ``PRIORITY_CROWD`` more decodes 10 ms apart."""
    from asr.worker.engines.base import AsrDecodeRequest

    def crowd() -> list[asyncio.Task[Any]]:
        request = AsrDecodeRequest(audio=audio, background=background)
        return [
            asyncio.create_task(engine.decode(request)) for _ in range(PRIORITY_CROWD)
        ]

    others = crowd() if crowd_first else []
    await asyncio.sleep(0.01)
    started = time.monotonic()
    final = asyncio.create_task(engine.decode(AsrDecodeRequest(audio=audio)))
    if not crowd_first:
        await asyncio.sleep(0.01)
        others = crowd()
    await final
    latency = time.monotonic() - started
    await asyncio.gather(*others)
    return latency


async def priority_rows(engine: Any, audio: Any, rounds: int) -> list[str]:
    """Finals before chunk decodes, on the vLLM engine alone."""
    cases = {
        f"{PRIORITY_CROWD} chunk decodes requested while it runs (held back)": (
            False,
            True,
        ),
        f"{PRIORITY_CROWD} chunk decodes running when it arrives (priority only)": (
            True,
            True,
        ),
        f"{PRIORITY_CROWD} equal-priority decodes running when it arrives": (
            True,
            False,
        ),
    }
    alone: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        alone += await direct(engine, audio, 1, idle=False)
        for name, (crowd_first, background) in cases.items():
            times[name].append(
                await final_with_crowd(
                    engine, audio, crowd_first=crowd_first, background=background
                )
            )
    base = p50(alone)
    rows = [f"| final decode alone | {base * 1000:.0f} ms | 1.00 |"]
    for name, values in times.items():
        rows.append(
            f"| with {name} | {p50(values) * 1000:.0f} ms | {p50(values) / base:.2f} |"
        )
    return rows


def table(cells: dict[tuple[str, int], Cell], levels: list[int]) -> list[str]:
    lines = [
        "| engine | concurrency (sessions) | commit→completed p50 (max) "
        "| first delta p50 | engine alone p50 | stack ÷ engine "
        "| largest vLLM step batch |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for level in levels:
        for name in ENGINES:
            c = cells[(name, level)]
            lines.append(
                f"| {name} | {level} ({len(c.completed)}) "
                f"| {p50(c.completed) * 1000:.0f} ms ({max(c.completed) * 1000:.0f} ms) "
                f"| {p50(c.first_delta):.2f} s | {p50(c.alone) * 1000:.0f} ms "
                f"| {p50(c.completed) / p50(c.alone):.2f} "
                f"| {c.max_batch if name == 'vllm' else '—'} |"
            )
    lines += [
        "",
        "| concurrency | vLLM ÷ faster-whisper: commit→completed "
        "| first delta | engine alone |",
        "|---:|---:|---:|---:|",
    ]
    for level in levels:
        fw, vl = cells[("faster-whisper", level)], cells[("vllm", level)]
        lines.append(
            f"| {level} | {p50(vl.completed) / p50(fw.completed):.2f} "
            f"| {p50(vl.first_delta) / p50(fw.first_delta):.2f} "
            f"| {p50(vl.alone) / p50(fw.alone):.2f} |"
        )
    return lines


async def bench(levels: list[int], rounds: int) -> None:
    from asr.worker.engines import load_faster_whisper
    from veena_site.embedded import start_embedded_worker
    from veena_site.runtime import get_runtime

    pcm, audio16k = await asyncio.to_thread(speech)
    key = await asyncio.to_thread(api_key)
    rss = TreeRss()
    rss.start()
    loaded = time.monotonic()
    task = start_embedded_worker()  # ASR_ENGINE=vllm: loads and warms up vLLM
    runtime = get_runtime()
    await runtime.wait_loaded()
    vllm = runtime.engine("asr")
    fw = None
    try:
        assert vllm is not None, "the vLLM engine did not load (see the log above)"
        load_s = time.monotonic() - loaded
        fw = await asyncio.to_thread(load_faster_whisper)
        cells, priority = await measure(
            runtime,
            {"vllm": vllm, "faster-whisper": fw},
            key,
            pcm,
            audio16k,
            levels,
            rounds,
        )
    finally:  # vLLM's engine core would keep an unclosed process alive
        runtime.engines["asr"].engine = vllm
        await runtime.shutdown()
        if fw is not None:
            fw.close()
        task.cancel()
        rss.stop()
    report(
        cells, priority, rss, levels, load_s, vllm.model_version, len(pcm) / 2 / 24000
    )


async def measure(
    runtime: Any,
    engines: dict[str, Any],
    key: str,
    pcm: bytes,
    audio: Any,
    levels: list[int],
    rounds: int,
) -> tuple[dict[tuple[str, int], Cell], list[str]]:
    """Every level's rounds, then the priority cases."""
    for engine in engines.values():
        await direct(engine, audio, 1, idle=False)  # warm up
    cells = {(name, level): Cell() for name in ENGINES for level in levels}
    for level in levels:
        count = max(1, rounds // level)  # ≥ rounds sessions per level
        for n in range(count):
            print(f"level {level}: round {n + 1}/{count}", file=sys.stderr, flush=True)
            await run_round(runtime, engines, key, pcm, audio, level, n, cells)
    return cells, await priority_rows(engines["vllm"], audio, max(2, rounds // 4))


def report(
    cells: dict[tuple[str, int], Cell],
    priority: list[str],
    rss: TreeRss,
    levels: list[int],
    load_s: float,
    version: str,
    seconds: float,
) -> None:
    """Print the tables."""
    print(
        f"\nRealtime ASR bench, vLLM ({version}, loaded and warmed up in "
        f"{load_s:.0f} s) vs faster-whisper tiny.en: {os.cpu_count()} CPUs, "
        f"{seconds:.1f} s of 24 kHz speech per session, 100 ms appends in real time"
    )
    print("\n".join(table(cells, levels)))
    print("\n| vLLM final decode (engine alone) | p50 | ÷ alone |\n|---|---:|---:|")
    print("\n".join(priority))
    peaks = ", ".join(
        f"{name} {size / 2**30:.2f} GiB"
        for name, size in sorted(rss.peak_by_name.items(), key=lambda kv: -kv[1])
        if size > 50 * 2**20
    )
    print(f"\nProcess tree peak RSS: {rss.peak_total / 2**30:.2f} GiB ({peaks})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default="", help="local Hugging Face Whisper checkpoint"
    )
    parser.add_argument(
        "--levels",
        default=os.environ.get("BENCH_LEVELS", "1,4,8"),
        help="concurrency levels, e.g. 1,4,8",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=int(os.environ.get("BENCH_ROUNDS", "8")),
        help="sessions per level (rounds of `level` sessions)",
    )
    args = parser.parse_args()
    from gateway.worker.vllm_env import vllm_installed

    if not vllm_installed():
        print("bench/vllm_asr.py skipped: the vLLM tier is not installed (make vllm)")
        return
    levels = [int(x) for x in args.levels.split(",")]
    data_dir = configure(
        ASR_ENGINE="vllm",
        ASR_VLLM_MODEL=args.model,
        ASR_VLLM_MAX_NUM_SEQS=max(16, 2 * max(levels)),
        # A loaded host can delay the worker's admission answer past the 500 ms default.
        ASR_WORKER_ANSWER_MS=5000,
        ASR_ADMISSION_WAIT_MS=5000,
    )
    try:
        asyncio.run(bench(levels, args.rounds))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
