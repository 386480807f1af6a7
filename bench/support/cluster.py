"""Bench helpers: fake-engine worker processes on Redis, and the gateway side of TTS jobs.

``Cluster`` starts ``manage.py gpuworker`` children (fake TTS engine, loopback Redis, a channel
prefix of their own) and configures this process as a gateway on the same layer.
``GatewayJob`` is the channel-layer half of one ``/v1/tts/ws`` consumer: it admits the job
through ``gateway.link.jobclient.WorkerLink`` (placement, retries, keepalives), acks chunks the
way the consumer does, and records when each chunk arrived and how long its hop took.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from veena_site.conf.registry import child_environment  # noqa: E402

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0–100)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def redis_available() -> bool:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError:
        return False
    return True


def setup_gateway(prefix: str, data_dir: str) -> None:
    """Configure Django in this process as a gateway on ``prefix`` (call once, first)."""
    os.environ.update(
        DJANGO_SETTINGS_MODULE="bench.support.settings",
        REDIS_URL=REDIS_URL,
        CHANNEL_PREFIX=prefix,
        DATA_DIR=data_dir,
        TTS_ENGINE="fake",
        ASR_ENGINE="fake",
        LOG_LEVEL="WARNING",
    )
    import django

    django.setup()


class Cluster:
    """``count`` fake-engine TTS worker processes with ``slots`` slots each."""

    def __init__(
        self, *, prefix: str, data_dir: str, count: int, slots: int, **env: object
    ) -> None:
        self.prefix, self.count, self.slots = prefix, count, slots
        child = {
            k: v
            for k, v in os.environ.items()
            if k not in ("REDIS_URL", "DATABASE_URL")
        }
        child = child_environment(
            child,
            DJANGO_SETTINGS_MODULE="bench.support.settings",
            PYTHONPATH=str(ROOT),
            REDIS_URL=REDIS_URL,
            CHANNEL_PREFIX=prefix,
            DATA_DIR=data_dir,
            TTS_ENGINE="fake",
            ASR_ENGINE="fake",
            WORKER_KINDS="tts",
            TTS_WORKER_SLOTS=slots,
            LOG_LEVEL="WARNING",
            **env,
        )
        self.logs = [
            open(Path(data_dir) / f"worker-{prefix}-{i}.log", "wb")  # noqa: SIM115
            for i in range(count)
        ]
        self.procs = [
            subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "gpuworker"],
                cwd=ROOT,
                env=child,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            for log in self.logs
        ]

    def wait_live(self, limit_s: float = 60) -> None:
        """Wait until every worker is live, ready and advertises its own channel."""
        from gateway.liveness import get_liveness

        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            live = get_liveness().live_workers()
            if sum(1 for s in live if s.serves("tts") and s.channels) >= self.count:
                return
            for proc in self.procs:
                if proc.poll() is not None:
                    raise SystemExit(f"a worker exited with {proc.returncode}")
            time.sleep(0.1)
        raise SystemExit("workers not live in time")

    def busy(self) -> list[int]:
        """Busy TTS slots of each live worker, as published."""
        from gateway.liveness import get_liveness

        return sorted(s.busy.get("tts", 0) for s in get_liveness().live_workers())

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        for log in self.logs:
            log.close()


def new_prefix(name: str) -> str:
    return f"veena-bench-{name}-{uuid.uuid4().hex[:6]}"


def new_data_dir(name: str) -> str:
    return tempfile.mkdtemp(prefix=f"veena-bench-{name}-")


@dataclass
class GatewayJob:
    """One TTS job driven from this process the way a consumer drives it."""

    layer: Any
    chars: int
    answer_ms: int = 500
    wait_ms: int = 1000
    link: Any = None
    channel: str = ""
    outcome: Any = None
    submitted_at: float = 0.0
    admitted_at: float = 0.0
    first_chunk_at: float = 0.0
    done_at: float = 0.0
    chunks: int = 0
    hops: list[float] = field(default_factory=list)
    gaps: list[tuple[int, int]] = field(default_factory=list)  # (expected, received)
    error: str = ""

    async def admit(self) -> bool:
        """Submit and wait for the link's outcome; True when a worker accepted."""
        from gateway.link.jobclient import WorkerLink

        self.channel = await self.layer.new_channel("bench.")
        self.link = WorkerLink(
            layer=self.layer,
            own_channel=self.channel,
            kind="tts",
            answer_ms=self.answer_ms,
            wait_ms=self.wait_ms,
            stall_s=3.0,
        )
        self.submitted_at = time.perf_counter()
        outcome = await self.link.submit(self._build)
        while outcome is None:
            outcome = await self._handle(await self.layer.receive(self.channel))
        self.outcome = outcome
        self.admitted_at = time.perf_counter()
        if outcome.name != "ACCEPTED":
            await self.link.close()
            return False
        from tts.messages import TtsAck

        await self.link.send(TtsAck(job_id=self.link.job_id, seq=-1))
        return True

    async def stream(self) -> None:
        """Read the accepted job's chunks until it is done (or fails)."""
        while not self.done_at and not self.error:
            outcome = await self._handle(await self.layer.receive(self.channel))
            if outcome is not None and outcome.name == "LOST":
                self.error = "lost"
        await self.link.close()

    async def close(self) -> None:
        if self.link is not None:
            await self.link.close()

    def _build(self, job_id: str, deadline: float) -> Any:
        from tts.messages import TtsSubmit

        text = "a" * self.chars
        segment = {"seq": 0, "text": text, "char_start": 0, "char_end": len(text)}
        return TtsSubmit(
            job_id=job_id,
            reply_channel=self.channel,
            deadline=deadline,
            voice="tone",
            segments=[segment],
            format="pcm",
        )

    async def _handle(self, message: dict[str, Any]) -> Any:
        from gateway.link.jobclient import TIMER
        from tts.messages import TtsAck

        kind = message["type"]
        if kind == TIMER:
            return await self.link.on_timer(message)
        if kind in ("gpu.job.accepted", "gpu.job.busy", "gpu.job.not_ready"):
            return await self.link.on_reply(message)
        if not self.link.touch(message):
            return None
        now = time.time()
        if kind == "gpu.tts.chunk":
            if "sent_at" in message:
                self.hops.append(now - message["sent_at"])
            self.first_chunk_at = self.first_chunk_at or time.perf_counter()
            seq = message["seq"]
            if seq != self.chunks:
                self.gaps.append((self.chunks, seq))
            self.chunks += 1
            if seq % 8 == 7:
                await self.link.send(TtsAck(job_id=self.link.job_id, seq=seq))
        elif kind == "gpu.tts.done":
            self.done_at = time.perf_counter()
        elif kind == "gpu.job.failed":
            self.error = message.get("code", "failed")
        return None


async def hold(job: GatewayJob, stop: asyncio.Event) -> None:
    """Keep an accepted job's slot until ``stop`` (reads and acks its chunks meanwhile)."""
    reader = asyncio.ensure_future(job.stream())
    await asyncio.wait(
        [reader, asyncio.ensure_future(stop.wait())],
        return_when=asyncio.FIRST_COMPLETED,
    )
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    await job.close()
