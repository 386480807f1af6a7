"""OpenAI-compatible REST benchmark (issue 15), every path side by side in one run.

A ``manage.py rungateway`` child (embedded topology, Piper + faster-whisper, a fresh
``DATA_DIR`` and key). At concurrency 1 and 8, round by round in alternating order:

* speech: ``POST /v1/audio/speech`` (``pcm``, chunked: first byte and total), ``POST /v1/tts``
  (the whole body at once) and ``/v1/tts/ws`` (first binary frame and ``complete``), on the
  same texts at 24 kHz;
* transcription: ``POST /v1/audio/transcriptions`` (``json``) vs faster-whisper alone in this
  process (the same model and threads, the whole file in one decode) on the same files (Piper
  speech of 5 s to 25 s).

Prints medians / p95 in ms and the ratios REST ÷ WebSocket and REST ÷ engine. The machine is
shared, so every number is measured under load; compare the ratios, measured together.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.tts import TEXTS, free_port, manage, wait_ready  # noqa: E402

LEVELS = tuple(int(x) for x in os.environ.get("BENCH_LEVELS", "1,8").split(","))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))  # batches per level and path
RATE = 24_000
Sample = tuple[float, float]  # (first byte, total) seconds


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def gateway_env(data_dir: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")
    }
    for name in ("TTS_ENGINE", "ASR_ENGINE", "WORKER_KINDS", "GATEWAY_KINDS"):
        env.pop(name, None)
    env.update(
        DJANGO_SETTINGS_MODULE="bench.support.settings",
        DATA_DIR=data_dir,
        PYTHONPATH=str(ROOT),
        LOG_LEVEL="WARNING",
    )
    return env


async def rest_speech(client: object, text: str) -> Sample:
    started = time.perf_counter()
    first = None
    body = {"model": "tts-1", "voice": "alloy", "input": text, "response_format": "pcm"}
    async with client.stream("POST", "/v1/audio/speech", json=body) as resp:  # type: ignore[attr-defined]
        assert resp.status_code == 200, resp.status_code
        async for _ in resp.aiter_raw():
            first = first or time.perf_counter()
    end = time.perf_counter()
    return (first or end) - started, end - started


async def rest_tts_whole(client: object, text: str) -> Sample:
    started = time.perf_counter()
    body = {"text": text, "format": "pcm", "sample_rate": RATE}
    resp = await client.post("/v1/tts", json=body)  # type: ignore[attr-defined]
    assert resp.status_code == 200, resp.status_code
    end = time.perf_counter()
    return end - started, end - started


async def ws_speech(port: int, key: str, text: str) -> Sample:
    import websockets

    url = f"ws://127.0.0.1:{port}/v1/tts/ws"
    headers = {"Authorization": f"Bearer {key}"}
    started = time.perf_counter()
    first = None
    async with websockets.connect(url, additional_headers=headers) as ws:
        await ws.send(json.dumps({"text": text, "format": "pcm", "sample_rate": RATE}))
        async for message in ws:
            if isinstance(message, bytes):
                first = first or time.perf_counter()
                continue
            event = json.loads(message)
            assert event["event"] != "error", event
            if event["event"] == "complete":
                break
    end = time.perf_counter()
    return (first or end) - started, end - started


async def batch(
    level: int, count: int, one: Callable[[int], Awaitable[Sample]]
) -> list[Sample]:
    """``count`` calls spread over ``level`` concurrent clients."""
    results: list[Sample] = []

    async def client(index: int) -> None:
        for n in range(index, count, level):
            results.append(await one(n))

    await asyncio.gather(*(client(i) for i in range(level)))
    return results


def make_files(port: int, key: str) -> list[tuple[bytes, float]]:
    """Piper speech of each text, and of all three, as WAV files (via the REST call)."""
    import httpx

    from openai_rest.decode import decode_upload

    texts = [*TEXTS, " ".join(TEXTS)]
    files = []
    with httpx.Client(
        base_url=f"http://127.0.0.1:{port}",
        headers={"Authorization": f"Bearer {key}"},
        timeout=120,
    ) as client:
        for text in texts:
            body = {"model": "tts-1", "voice": "alloy", "input": text}
            wav = client.post(
                "/v1/audio/speech", json=body | {"response_format": "flac"}
            ).content
            pcm = decode_upload(io.BytesIO(wav), max_seconds=600)
            files.append((wav, len(pcm) / 16_000))
    return files


async def rest_transcribe(client: object, wav: bytes) -> Sample:
    started = time.perf_counter()
    resp = await client.post(  # type: ignore[attr-defined]
        "/v1/audio/transcriptions",
        data={"model": "whisper-1"},
        files={"file": ("a.flac", wav)},
    )
    assert resp.status_code == 200, resp.text
    end = time.perf_counter()
    return end - started, end - started


async def engine_transcribe(engine: object, pcm: object) -> Sample:
    from asr.worker.engines.base import AsrDecodeRequest

    started = time.perf_counter()
    await engine.decode(AsrDecodeRequest(audio=pcm, language="en"))  # type: ignore[attr-defined]
    end = time.perf_counter()
    return end - started, end - started


def main() -> None:
    import httpx
    import numpy as np

    from asr.worker.engines.faster_whisper import FasterWhisperAsr
    from openai_rest.decode import decode_upload

    began = time.monotonic()
    data_dir = tempfile.mkdtemp(prefix="veena-bench-rest-")
    env = gateway_env(data_dir)
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
    samples: dict[tuple[str, int], list[Sample]] = defaultdict(list)
    try:
        wait_ready(port, proc)
        time.sleep(3)  # the ASR worker loads after the TTS one answers /readyz
        files = make_files(port, key)
        decoded = [
            decode_upload(io.BytesIO(wav), max_seconds=600).astype(np.float32) / 32768
            for wav, _ in files
        ]
        engine = FasterWhisperAsr.load()

        async def run() -> None:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {key}"},
                timeout=300,
                limits=httpx.Limits(max_connections=16),
            ) as client:
                paths: dict[str, Callable[[int], Awaitable[Sample]]] = {
                    "speech": lambda n: rest_speech(client, TEXTS[n % 3]),
                    "tts-whole": lambda n: rest_tts_whole(client, TEXTS[n % 3]),
                    "ws": lambda n: ws_speech(port, key, TEXTS[n % 3]),
                    "transcribe": lambda n: rest_transcribe(client, files[n % 4][0]),
                    "engine": lambda n: engine_transcribe(engine, decoded[n % 4]),
                }
                for name in paths:  # warm-up
                    await paths[name](0)
                for level in LEVELS:
                    count = max(4, level)
                    for round_ in range(ROUNDS):
                        order = list(paths) if round_ % 2 == 0 else list(paths)[::-1]
                        for name in order:
                            samples[name, level] += await batch(
                                level, count, paths[name]
                            )

        asyncio.run(run())
        engine.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    report(samples, files)
    print(f"(benchmark took {time.monotonic() - began:.0f} s)")


def report(
    samples: dict[tuple[str, int], list[Sample]], files: list[tuple[bytes, float]]
) -> None:
    def med(name: str, level: int, index: int) -> float:
        return statistics.median(s[index] for s in samples[name, level])

    def cell(name: str, level: int, index: int) -> str:
        values = [s[index] for s in samples[name, level]]
        return f"{statistics.median(values) * 1000:6.0f} / {p95(values) * 1000:6.0f}"

    seconds = ", ".join(f"{d:.1f}" for _, d in files)
    print(
        f"\nOpenAI REST benchmark, {os.cpu_count()} CPUs (measured under load: shared CPU)"
    )
    print("Speech: Piper, PCM 24 kHz, 3 texts; ms median / p95")
    print(
        f"{'conc':>4} {'n':>3} | {'REST 1st byte':>15} {'REST total':>15}"
        f" | {'/v1/tts whole':>15} | {'WS 1st frame':>15} {'WS total':>15}"
        f" | {'1st÷WS':>6} {'tot÷WS':>6} {'whole÷WS':>8}"
    )
    for level in LEVELS:
        print(
            f"{level:>4} {len(samples['speech', level]):>3} | {cell('speech', level, 0)}"
            f" {cell('speech', level, 1)} | {cell('tts-whole', level, 1)}"
            f" | {cell('ws', level, 0)} {cell('ws', level, 1)}"
            f" | {med('speech', level, 0) / med('ws', level, 0):6.2f}"
            f" {med('speech', level, 1) / med('ws', level, 1):6.2f}"
            f" {med('tts-whole', level, 1) / med('ws', level, 1):8.2f}"
        )
    print(
        f"Transcription: faster-whisper tiny.en, files of {seconds} s; ms median / p95"
    )
    print(
        f"{'conc':>4} {'n':>3} | {'REST':>15} {'engine alone':>15} | {'REST÷engine':>11}"
    )
    for level in LEVELS:
        ratio = med("transcribe", level, 1) / med("engine", level, 1)
        print(
            f"{level:>4} {len(samples['transcribe', level]):>3}"
            f" | {cell('transcribe', level, 1)} {cell('engine', level, 1)} | {ratio:11.2f}"
        )


if __name__ == "__main__":
    main()
