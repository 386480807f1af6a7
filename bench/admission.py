"""Admission benchmark: time from submit to a worker's acceptance at 90 % slot occupancy.

2 and then 4 ``gpuworker`` processes (fake TTS engine, ``BENCH_ADMISSION_SLOTS`` slots each) on Redis on
loopback; this process is the gateway (``gateway.link.jobclient.WorkerLink``, as a consumer uses
it). A closed loop keeps 90 % of all slots busy: each of ``0.9 × slots`` clients admits a job,
holds it for 0.3–2 s (reading and acking its chunks), ends it and at once admits the next, so
every admission happens with about 90 % of the slots taken and jobs ending at random times on
random workers. Both placements run side by side in one run, in turns:

* ``shared``: the job's first message goes to the shared ``tts-worker`` channel; whichever worker
  pops it answers, a full one ``busy``, and the link retries after 25–50 ms;
* ``least_loaded``: ``gateway.link.placement`` sends it to the worker with the most free slots,
  on that worker's own channel.

Reported: admission p50 / p99, the share admitted on the first try, attempts per admission,
admissions refused (``OVERLOADED``), and the ratio shared / least_loaded. Measured under load:
the machine is shared, so read the ratios, not the absolute milliseconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.cluster import (  # noqa: E402
    Cluster,
    GatewayJob,
    new_data_dir,
    new_prefix,
    percentile,
    redis_available,
    setup_gateway,
)

SLOTS = int(os.environ.get("BENCH_ADMISSION_SLOTS", "10"))
WORKER_COUNTS = tuple(
    int(x) for x in os.environ.get("BENCH_ADMISSION_WORKERS", "2,4").split(",") if x
)
DURATION_S = float(os.environ.get("BENCH_ADMISSION_S", "8"))
ROUNDS = int(
    os.environ.get("BENCH_ADMISSION_ROUNDS", "2")
)  # turns per placement, interleaved
OCCUPANCY = 0.9
MODES = ("shared", "least_loaded")


async def closed_loop(layer: object, clients: int, duration_s: float) -> dict:
    """``clients`` loops of admit → hold → end for ``duration_s``; the admissions."""
    samples: list[float] = []
    attempts: list[int] = []
    refused = 0
    stop_at = time.monotonic() + duration_s

    async def client() -> None:
        nonlocal refused
        await asyncio.sleep(random.uniform(0, 0.5))  # do not start in lockstep
        while time.monotonic() < stop_at:
            job = GatewayJob(layer=layer, chars=300)
            accepted = await job.admit()
            samples.append(job.admitted_at - job.submitted_at)
            attempts.append(job.link._attempts)
            if not accepted:
                refused += 1
                continue
            reader = asyncio.ensure_future(job.stream())
            await asyncio.sleep(random.uniform(0.3, 2.0))
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            await job.close()

    await asyncio.gather(*(client() for _ in range(clients)))
    return {"samples": samples, "attempts": attempts, "refused": refused}


def summarize(runs: list[dict]) -> dict:
    samples = [s for r in runs for s in r["samples"]]
    attempts = [a for r in runs for a in r["attempts"]]
    return {
        "admissions": len(samples),
        "p50_ms": percentile(samples, 50) * 1000,
        "p99_ms": percentile(samples, 99) * 1000,
        "first_try": sum(1 for a in attempts if a == 1) / len(attempts),
        "attempts_mean": sum(attempts) / len(attempts),
        "refused": sum(r["refused"] for r in runs),
    }


async def wait_idle(cluster: Cluster, limit_s: float = 10) -> None:
    deadline = time.monotonic() + limit_s
    while any(cluster.busy()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


async def measure(workers: int, data_dir: str) -> dict[str, dict]:
    from channels.layers import get_channel_layer
    from django.conf import settings

    prefix = new_prefix(f"adm{workers}")
    settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = prefix
    from channels.layers import channel_layers

    from gateway.liveness import get_liveness

    channel_layers.backends.clear()
    get_liveness.cache_clear()
    cluster = Cluster(
        prefix=prefix,
        data_dir=data_dir,
        count=workers,
        slots=SLOTS,
        FAKE_TTS_CHUNK_DELAY_S=0.2,
    )
    try:
        cluster.wait_live()
        layer = get_channel_layer()
        clients = round(OCCUPANCY * workers * SLOTS)
        runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
        for _ in range(ROUNDS):
            for mode in MODES:
                settings.WORKER_PLACEMENT = mode
                runs[mode].append(await closed_loop(layer, clients, DURATION_S))
                await wait_idle(cluster)
        return {mode: summarize(r) for mode, r in runs.items()}
    finally:
        cluster.stop()


def main() -> None:
    if not redis_available():
        print("admission benchmark skipped: no Redis at BENCH_REDIS_URL")
        return
    started = time.monotonic()
    data_dir = new_data_dir("admission")
    setup_gateway(new_prefix("adm"), data_dir)
    results = {n: asyncio.run(measure(n, data_dir)) for n in WORKER_COUNTS}
    shutil.rmtree(data_dir, ignore_errors=True)
    print(
        f"\nAdmission at {OCCUPANCY:.0%} slot occupancy: fake TTS engine, Redis on loopback,"
        f" {SLOTS} slots per worker, {os.cpu_count()} CPUs (measured under load)"
    )
    print(
        f"{'workers':>7} {'placement':>12} | {'n':>5} {'p50 ms':>7} {'p99 ms':>7}"
        f" {'1st try':>7} {'tries':>5} {'refused':>7}"
    )
    for n, by_mode in results.items():
        for mode, r in by_mode.items():
            print(
                f"{n:>7} {mode:>12} | {r['admissions']:>5} {r['p50_ms']:7.2f}"
                f" {r['p99_ms']:7.2f} {r['first_try']:7.1%} {r['attempts_mean']:5.2f}"
                f" {r['refused']:>7}"
            )
        shared, placed = by_mode["shared"], by_mode["least_loaded"]
        print(
            f"{n:>7} {'ratio s/l':>12} | {'':>5} {shared['p50_ms'] / placed['p50_ms']:7.2f}"
            f" {shared['p99_ms'] / placed['p99_ms']:7.2f}"
        )
    out = os.environ.get("BENCH_JSON_DIR")
    if out:
        summary = []
        for n, by_mode in results.items():
            for mode, r in by_mode.items():
                summary.append([f"{n} workers {mode} p99", round(r["p99_ms"], 2), "ms"])
                summary.append(
                    [f"{n} workers {mode} first try", round(r["first_try"], 3), "share"]
                )
            ratio = by_mode["shared"]["p99_ms"] / by_mode["least_loaded"]["p99_ms"]
            summary.append([f"{n} workers p99 shared ÷ least_loaded", ratio, "ratio"])
        data = {"summary": summary, "results": {str(n): r for n, r in results.items()}}
        (Path(out) / "admission.json").write_text(json.dumps(data, indent=2))
    print(f"(benchmark took {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
