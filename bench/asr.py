"""Realtime ASR benchmark: the full stack against the engine alone (run by ``make bench``).

One process, embedded topology: the ``/v1/realtime`` consumer driven through the real ASGI
application, the in-memory channel layer, the worker consumer and faster-whisper tiny.en on CPU.
Each session streams Piper speech at 24 kHz in 100 ms appends, paced in real time, then commits.
Measured per concurrency level (1, 4, 16), one run each:

* commit → ``completed`` through the stack, and the same audio decoded by the engine directly
  at the same concurrency (the ratio is the stack's overhead, pre-commit streaming included);
  each round runs its sessions and its direct decodes side by side (odd rounds direct first), and
  the paired overhead is the median over rounds of (stack p50 − engine p50) of the round;
* the engine alone is called after as long an idle time as a session streams, as the stack's
  final decode is;
* the worker's own final decode time (``gpu.asr.final`` ``decode_ms``): stack − this is the
  plumbing, this − engine alone is what decoding inside the stack costs extra;
* first append sent → first ``delta`` (pre-commit deltas, §8.3);
* bytes through the channel layer per session (every ``asr.job.*`` message, msgpack-encoded as
  channels_redis would send it) ÷ the PCM bytes the client sent.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgpack  # noqa: E402
import numpy as np  # noqa: E402
import soxr  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from channels.testing import WebsocketCommunicator  # noqa: E402
from django.core.management import call_command  # noqa: E402

from asr.engines.base import MODEL_RATE  # noqa: E402


def configure(**env: str) -> str:
    """Embedded-topology settings in a fresh DATA_DIR (returned), then ``django.setup()``.

    Import-safe on purpose: vLLM's engine core is a spawned process that imports the main
    module again, so a benchmark does its setup here and not at import time.
    """
    import django

    data_dir = tempfile.mkdtemp(prefix="veena-bench-asr-")
    os.environ.update(
        DJANGO_SETTINGS_MODULE="veena_site.settings",
        DATA_DIR=data_dir,
        WORKER_KINDS="asr",
        GATEWAY_KINDS="asr",
        LOG_LEVEL="WARNING",
        ASR_WORKER_SLOTS="32",
        **env,
    )
    os.environ.pop("REDIS_URL", None)
    django.setup()
    return data_dir


TEXTS = (
    "Hello world. This is a test of the speech gateway.",
    "The quick brown fox jumps over the lazy dog.",
)
RATE = 24000
APPEND_S = 0.1
LEVELS = tuple(int(x) for x in os.environ.get("BENCH_LEVELS", "1,4,16").split(","))
ROUNDS = int(
    os.environ.get("BENCH_ROUNDS", "8")
)  # sequential rounds give small levels a median


def speech() -> tuple[bytes, np.ndarray]:
    """Piper's reading of TEXTS: 24 kHz PCM16 bytes and the same audio at 16 kHz float32."""
    from tts.engines.base import TtsEngineRequest
    from tts.engines.piper import PiperTts

    async def run() -> np.ndarray:
        engine = PiperTts.load(threads=1)
        try:
            req = TtsEngineRequest(text=" ".join(TEXTS), voice=engine.default_voice)
            chunks = [c async for c in engine.stream(req)]
            return soxr.resample(np.concatenate(chunks), engine.native_rate, RATE)
        finally:
            engine.close()

    audio = asyncio.run(run())
    pcm = np.clip(np.rint(audio * 32767), -32768, 32767).astype("<i2")
    at16k = soxr.resample(pcm.astype(np.float32) / 32768.0, RATE, MODEL_RATE)
    return pcm.tobytes(), np.asarray(at16k, dtype=np.float32)


def api_key() -> str:
    """A key on a plan with room for every session."""
    from accounts.models import Plan
    from accounts.services.accounts import (
        account_get_or_create,
        plan_get_or_create_default,
    )
    from accounts.services.api_keys import api_key_create

    call_command("migrate", verbosity=0)
    plan = plan_get_or_create_default()
    Plan.objects.filter(pk=plan.pk).update(
        max_concurrent_streams=100, requests_per_minute=10_000
    )
    account = account_get_or_create(name="bench", plan=Plan.objects.get(pk=plan.pk))
    _, raw = api_key_create(
        account=account, name="bench", actor=None, actor_label="bench"
    )
    return raw


class ChannelMeter:
    """Counts the msgpack size of every message the gateway sends to the worker, per job."""

    def __init__(self) -> None:
        self.bytes: dict[str, int] = {}
        self.decode_ms: list[int] = []  # the worker's own final decode times
        layer = get_channel_layer()
        original = layer.send

        async def send(channel: str, message: dict) -> None:
            if message["type"].startswith("asr.job."):
                size = len(msgpack.packb(message, use_bin_type=True))
                self.bytes[message["job_id"]] = (
                    self.bytes.get(message["job_id"], 0) + size
                )
            elif message["type"] == "gpu.asr.final":
                self.decode_ms.append(message["decode_ms"])
            await original(channel, message)

        layer.send = send


async def session(key: str, pcm: bytes) -> dict[str, float]:
    """One realtime session: paced appends, commit, wait for completed."""
    from veena_site.asgi import application

    comm = WebsocketCommunicator(
        application,
        "/v1/realtime",
        headers=[(b"authorization", f"Bearer {key}".encode())],
    )
    await comm.connect()
    created = json.loads(await comm.receive_from(timeout=30))
    assert created["type"] == "session.created", created
    step = int(RATE * APPEND_S) * 2
    first_delta: float | None = None
    started = time.monotonic()

    async def drain() -> None:
        nonlocal first_delta
        while not await comm.receive_nothing(timeout=0.001):
            event = json.loads(await comm.receive_from())
            if event["type"].endswith(".delta") and first_delta is None:
                first_delta = time.monotonic() - started

    for n, i in enumerate(range(0, len(pcm), step)):
        chunk = base64.b64encode(pcm[i : i + step]).decode()
        await comm.send_to(
            text_data=json.dumps({"type": "input_audio_buffer.append", "audio": chunk})
        )
        await drain()
        await asyncio.sleep(max(0.0, started + (n + 1) * APPEND_S - time.monotonic()))
    committed = time.monotonic()
    await comm.send_to(text_data=json.dumps({"type": "input_audio_buffer.commit"}))
    while True:
        event = json.loads(await comm.receive_from(timeout=120))
        if event["type"].endswith(".delta") and first_delta is None:
            first_delta = time.monotonic() - started
        if event["type"] == "conversation.item.input_audio_transcription.completed":
            latency = time.monotonic() - committed
            break
    await comm.disconnect()
    return {"latency": latency, "first_delta": first_delta}


async def direct(
    engine: object, audio: np.ndarray, concurrency: int, *, idle: bool = True
) -> list[float]:
    """The engine alone on the same audio, ``concurrency`` decodes at once.

    With ``idle`` it first waits as long as a session streams: the stack's final decode always
    follows seconds of streaming, and a decode right after another one runs warm (18 ms faster
    at the median after 6 s idle on 2 vCPU), which would flatter the engine alone.
    """
    from asr.engines.base import AsrDecodeRequest

    if idle:
        await asyncio.sleep(len(audio) / MODEL_RATE)

    async def one() -> float:
        started = time.monotonic()
        await engine.decode(AsrDecodeRequest(audio=audio, language="en"))  # type: ignore[attr-defined]
        return time.monotonic() - started

    return list(await asyncio.gather(*(one() for _ in range(concurrency))))


@dataclass
class Level:
    """One concurrency level of one mode: per-round medians keep the pairs side by side."""

    mode: str
    level: int
    latencies: list[float] = field(default_factory=list)
    engine: list[float] = field(default_factory=list)
    pairs: list[float] = field(
        default_factory=list
    )  # per round: stack p50 - engine p50
    firsts: list[float] = field(default_factory=list)

    async def round(
        self, key: str, pcm: bytes, engine: object, audio: np.ndarray, n: int
    ) -> None:
        """Sessions and direct decodes of one round; odd rounds decode directly first."""

        async def sessions() -> list[dict[str, float]]:
            return list(
                await asyncio.gather(*(session(key, pcm) for _ in range(self.level)))
            )

        if n % 2:
            alone, results = await direct(engine, audio, self.level), await sessions()
        else:
            results, alone = await sessions(), await direct(engine, audio, self.level)
        stack = [r["latency"] for r in results]
        self.latencies += stack
        self.engine += alone
        self.pairs.append(statistics.median(stack) - statistics.median(alone))
        self.firsts += [
            r["first_delta"] for r in results if r["first_delta"] is not None
        ]

    def line(self, meter: ChannelMeter, pcm_bytes: int) -> str:
        """The level's table row."""
        stack, alone = statistics.median(self.latencies), statistics.median(self.engine)
        per_session = statistics.mean(meter.bytes.values())
        first = f"{statistics.median(self.firsts):.2f} s" if self.firsts else "—"
        cells = [
            self.mode,
            f"{self.level} ({len(self.latencies)})",
            f"{stack * 1000:.0f} ms ({max(self.latencies) * 1000:.0f} ms)",
            f"{statistics.median(meter.decode_ms):.0f} ms",
            f"{alone * 1000:.0f} ms",
            f"{(stack - alone) * 1000:+.0f} ms",
            f"{statistics.median(self.pairs) * 1000:+.0f} ms",
            f"{stack / alone:.2f}",
            first,
            f"{per_session / 1024:.0f} KiB",
            f"{per_session / pcm_bytes:.3f}",
        ]
        return "| " + " | ".join(cells) + " |"


HEADER = (
    "| pre-commit deltas | concurrency (sessions) | commit→completed p50 (max) "
    "| worker's final decode p50 | engine alone p50 | overhead p50 "
    "| overhead, paired per round, p50 | stack ÷ engine | first delta p50 "
    "| channel bytes/session | ÷ client PCM bytes |"
)


async def main() -> None:
    from django.conf import settings

    from veena_site.embedded import start_embedded_worker
    from veena_site.runtime import get_runtime

    pcm, audio16k = await asyncio.to_thread(speech)
    key = await asyncio.to_thread(api_key)
    meter = ChannelMeter()
    task = start_embedded_worker()
    runtime = get_runtime()
    await runtime.wait_loaded()
    engine = runtime.engine("asr")
    await direct(engine, audio16k, 1, idle=False)  # warm up
    lines = []
    rows: list[list[object]] = []
    for precommit in (
        True,
        False,
    ):  # streaming deltas cost decode time before the commit
        settings.ASR_PRECOMMIT_DELTAS = precommit
        for level in LEVELS:
            meter.bytes.clear()
            meter.decode_ms.clear()
            row = Level("on" if precommit else "off", level)
            for n in range(max(1, ROUNDS // level)):  # ≥ ROUNDS sessions per level
                await row.round(key, pcm, engine, audio16k, n)
            lines.append(row.line(meter, len(pcm)))
            ratio = statistics.median(row.latencies) / statistics.median(row.engine)
            label = f"deltas {row.mode} conc {level} commit→completed stack ÷ engine"
            rows.append([label, ratio, "ratio"])
    await runtime.shutdown()
    task.cancel()
    seconds = len(pcm) / 2 / RATE
    print(
        f"\nRealtime ASR bench: faster-whisper tiny.en, {os.cpu_count()} CPUs, "
        f"{seconds:.1f} s of 24 kHz speech per session, 100 ms appends in real time"
    )
    print(HEADER)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(lines))
    out = os.environ.get("BENCH_JSON_DIR")
    if out:  # for bench/compare.py (make bench)
        (Path(out) / "asr.json").write_text(json.dumps({"summary": rows}))


if __name__ == "__main__":
    data_dir = configure(ASR_ENGINE="faster_whisper")
    try:
        asyncio.run(main())
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
