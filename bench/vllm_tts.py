"""vLLM TTS benchmark: the engine (vLLM → frame parser → SNAC) at several concurrencies.

``python bench/vllm_tts.py --model PATH --snac PATH`` on a CUDA machine with a Veena or Orpheus
checkpoint and the snac_24khz weights: 1, 8, 32 and 64 concurrent streams. Without ``--model``
it builds (once) and runs the tiny random checkpoint of ``tts.worker.engines.tiny_orpheus`` under
``DATA_DIR`` (default ``var/``), with slot order forced and random SNAC weights: 1, 8 and 16
streams on a CPU. ``make bench`` runs it when the vLLM tier is installed.

Every level runs twice in one process, on one AsyncLLM: with the shared SNAC decoder batching
windows across streams (``TTS_SNAC_MAX_BATCH`` 64, 2 ms) and with one decode call per window
(max batch 1); the order alternates by level. Per request, measured in the engine's stream:

* TTFB: request → first audio chunk; RTF: request → last chunk ÷ seconds of audio;
* tokens/s: ids generated ÷ request time (per stream); frames/s: frames decoded by all streams ÷
  the level's wall time;
* real time: a stream is sustained when its audio, played from its first chunk on, never runs
  dry (each chunk arrives before the audio before it has played out).

Then the SNAC decoder alone, where the LLM cannot hide it: N streams push one frame each per step
in lockstep (steady state, one 5-frame window per stream per step); the time per step, batched and
unbatched, shows how the decode cost per stream grows with N.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEXTS = (
    "The quick brown fox jumps over the lazy dog near the quiet river bank.",
    "Every morning the market opens early and the vendors set out fresh bread.",
    "Please call me back when you have a moment to talk about the order.",
    "A journey of a thousand miles begins with a single step, they say.",
)
SNAC_RATE = 24_000


@dataclass
class Run:
    """One request's measurements."""

    ttfb: float
    total: float
    audio_s: float
    tokens: int
    frames: int
    stalled: bool


@dataclass
class Level:
    """One concurrency level in one decoder mode."""

    streams: int
    mode: str
    wall_s: float = 0.0
    runs: list[Run] = field(default_factory=list)
    calls: int = 0
    windows: int = 0


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


async def one_request(engine: Any, text: str, seed: int, max_tokens: int) -> Run:
    from tts.worker.engines.base import TtsEngineRequest

    req = TtsEngineRequest(
        text=text, voice=engine.default_voice, seed=seed, max_tokens=max_tokens
    )
    started = time.perf_counter()
    first = None
    played = 0.0  # audio seconds received before this chunk
    stalled = False
    async for pcm in engine.stream(req):
        now = time.perf_counter()
        if first is None:
            first = now
        elif now - first > played:
            stalled = True
        played += len(pcm) / SNAC_RATE
    end = time.perf_counter()
    return Run(
        ttfb=(first or end) - started,
        total=end - started,
        audio_s=played,
        tokens=req.stats.tokens,
        frames=req.stats.snac_frames,
        stalled=stalled,
    )


async def measure(
    engine: Any, batcher: Any, streams: int, mode: str, rounds: int, max_tokens: int
) -> Level:
    engine.batcher = batcher
    before = (batcher.counters.calls, batcher.counters.windows)
    level = Level(streams=streams, mode=mode)

    async def client(index: int) -> None:
        for n in range(rounds):
            text = TEXTS[(index + n) % len(TEXTS)]
            level.runs.append(
                await one_request(engine, text, index * 101 + n, max_tokens)
            )

    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(streams)))
    level.wall_s = time.perf_counter() - started
    level.calls = batcher.counters.calls - before[0]
    level.windows = batcher.counters.windows - before[1]
    return level


async def decoder_alone(batcher: Any, streams: int, frames: int = 24) -> float:
    """Seconds per lockstep step of ``streams`` streams (one frame each per step)."""
    from tts.worker.engines.snac_decoder import SnacStream

    rng = random.Random(streams)
    snacs = [SnacStream(batcher, seed=i) for i in range(streams)]
    codes = [
        [tuple(rng.randrange(4096) for _ in range(7)) for _ in range(frames)]
        for _ in snacs
    ]
    started = time.perf_counter()
    for step in range(frames):
        await asyncio.gather(
            *(s.push([c[step]]) for s, c in zip(snacs, codes, strict=True))
        )
    await asyncio.gather(*(s.finish() for s in snacs))
    return (time.perf_counter() - started) / frames


def row(level: Level) -> str:
    ttfb = [r.ttfb * 1000 for r in level.runs]
    rtf = [r.total / r.audio_s for r in level.runs if r.audio_s]
    tps = [r.tokens / r.total for r in level.runs if r.total]
    frames_s = sum(r.frames for r in level.runs) / level.wall_s
    realtime = sum(not r.stalled for r in level.runs)
    per_call = level.windows / level.calls if level.calls else 0.0
    return (
        f"{level.streams:>7} {level.mode:>9} | {statistics.median(ttfb):7.0f} / "
        f"{p95(ttfb):6.0f} | {statistics.median(tps):7.1f} | {frames_s:8.1f} | "
        f"{statistics.median(rtf):6.3f} | {realtime:>4}/{len(level.runs):<4} | "
        f"{per_call:6.2f}"
    )


def ratios(batched: Level, unbatched: Level) -> str:
    b_ttfb = statistics.median(r.ttfb for r in batched.runs)
    u_ttfb = statistics.median(r.ttfb for r in unbatched.runs)
    b_fps = sum(r.frames for r in batched.runs) / batched.wall_s
    u_fps = sum(r.frames for r in unbatched.runs) / unbatched.wall_s
    return (
        f"{'':>7} {'b / u':>9} | TTFB {b_ttfb / u_ttfb:5.2f}x {'':>8}| {'':>7} | "
        f"{b_fps / u_fps:7.2f}x | decoder calls {batched.calls}/{unbatched.calls}"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--model", type=Path, help="checkpoint directory (default: tiny)"
    )
    parser.add_argument("--snac", type=Path, help="SNAC 24 kHz directory")
    parser.add_argument("--recipe", default="veena", choices=["veena", "orpheus"])
    parser.add_argument("--snac-random-init", action="store_true")
    parser.add_argument("--levels", help="stream counts, e.g. 1,8 (or BENCH_LEVELS)")
    parser.add_argument("--rounds", type=int, default=2, help="requests per stream")
    parser.add_argument("--max-tokens", type=int, help="per request (default: CPU 210)")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--kv-cache-gib", type=int, default=None)
    return parser.parse_args()


def config_for(args: argparse.Namespace, cuda: bool, streams: int) -> Any:
    from tts.orpheus.vllm_config import VllmTtsConfig
    from tts.orpheus.vllm_prompts import RECIPES
    from tts.worker.engines.tiny_orpheus import build_tiny_orpheus

    data_dir = Path(os.environ.get("DATA_DIR", ROOT / "var"))
    tiny = args.model is None
    if tiny:
        paths = build_tiny_orpheus(data_dir / "tiny-orpheus")
        args.model, args.snac = paths.model, args.snac or paths.snac
    recipe = RECIPES[args.recipe]
    return VllmTtsConfig(
        model=args.model,
        snac=args.snac,
        recipe=recipe,
        voices=recipe.voices,
        data_dir=data_dir,
        dtype="float32" if tiny else args.dtype,
        max_num_seqs=streams,
        max_model_len=2048,
        kv_cache_gib=args.kv_cache_gib or (8 if cuda else 1),
        force_slot_order=tiny,
        snac_random_init=tiny or args.snac_random_init,
        snac_threads=max(1, (os.cpu_count() or 2) - 1),
    )


async def run(args: argparse.Namespace) -> None:
    import torch

    from tts.worker.engines.snac_decoder import SnacBatcher
    from tts.worker.engines.vllm import VllmSnacTts

    cuda = torch.cuda.is_available()
    default = "1,8,32,64" if cuda else "1,8,16"
    chosen = args.levels or os.environ.get("BENCH_LEVELS") or default
    levels = [int(x) for x in chosen.split(",")]
    max_tokens = args.max_tokens or (4096 if cuda else 210)
    config = config_for(args, cuda, max(levels))
    loaded = time.perf_counter()
    engine = await asyncio.to_thread(VllmSnacTts.load, config)
    loaded = time.perf_counter() - loaded
    batched = engine.batcher
    unbatched = SnacBatcher(batched.codec, max_batch=1, max_step=batched.max_step)
    try:
        for batcher in (batched, unbatched):  # warm-up
            await measure(engine, batcher, 1, "warm-up", 1, 70)
        results = []
        for i, streams in enumerate(levels):
            modes = [("batched", batched), ("unbatched", unbatched)]
            done = {}
            for mode, batcher in modes if i % 2 == 0 else modes[::-1]:
                done[mode] = await measure(
                    engine, batcher, streams, mode, args.rounds, max_tokens
                )
            results.append((done["batched"], done["unbatched"]))
        decoder = [
            (n, await decoder_alone(batched, n), await decoder_alone(unbatched, n))
            for n in levels
        ]
    finally:
        unbatched.close()
        engine.close()
    print_table(args, config, cuda, loaded, max_tokens, results)
    print_decoder(decoder)


def print_table(
    args: argparse.Namespace,
    config: Any,
    cuda: bool,
    loaded: float,
    max_tokens: int,
    results: list[tuple[Level, Level]],
) -> None:
    device = torch_device_name(cuda)
    print(
        f"\nvLLM TTS benchmark: {config.model} ({config.recipe.name}), SNAC {config.snac},"
        f" {device}; engine load {loaded:.0f} s; {args.rounds} request(s) per stream,"
        f" max_tokens {max_tokens}"
    )
    print(
        "TTFB ms; tok/s per stream (median); frames/s decoded by all streams; RTF median;"
        " real time = requests whose audio never ran dry; windows per decoder call"
    )
    print(
        f"{'streams':>7} {'snac':>9} | {'TTFB p50 / p95':>16} | {'tok/s':>7} | "
        f"{'frames/s':>8} | {'RTF':>6} | {'real time':>9} | {'w/call':>6}"
    )
    for batched, unbatched in results:
        print(row(batched))
        print(row(unbatched))
        print(ratios(batched, unbatched))


def print_decoder(decoder: list[tuple[int, float, float]]) -> None:
    print("\nSNAC decoder alone: ms per lockstep step (one frame of every stream)")
    print(
        f"{'streams':>7} | {'batched':>8} {'unbatched':>9} {'u / b':>6} | per stream b / u"
    )
    for streams, batched, unbatched in decoder:
        print(
            f"{streams:>7} | {batched * 1000:8.1f} {unbatched * 1000:9.1f}"
            f" {unbatched / batched:6.2f} | {batched * 1000 / streams:6.1f} /"
            f" {unbatched * 1000 / streams:6.1f}"
        )


def torch_device_name(cuda: bool) -> str:
    import torch

    if cuda:
        return f"CUDA {torch.cuda.get_device_name(0)}"
    return f"CPU ({os.cpu_count()} cores, eager)"


def main() -> None:
    from gateway.worker.vllm_env import TIER_MISSING, vllm_installed

    args = parse_args()
    if not vllm_installed():
        print("vLLM TTS benchmark skipped: " + TIER_MISSING.format(what="it"))
        return
    started = time.monotonic()
    asyncio.run(run(args))
    print(f"(benchmark took {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
