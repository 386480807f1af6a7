"""Helpers for driving ``/v1/tts/ws`` through the real ASGI application."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from veena_site.asgi import application
from veena_site.runtime import WorkerRuntime


def bearer(raw: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", b"Bearer " + raw.encode())]


@dataclass
class Transcript:
    """Everything the server sent, in order: ("text", dict) / ("bytes", b) / ("close", code)."""

    items: list[tuple[str, Any]] = field(default_factory=list)

    @property
    def events(self) -> list[dict[str, Any]]:
        return [v for k, v in self.items if k == "text"]

    @property
    def frames(self) -> list[bytes]:
        return [v for k, v in self.items if k == "bytes"]

    @property
    def close_code(self) -> int | None:
        codes = [v for k, v in self.items if k == "close"]
        return codes[-1] if codes else None

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == name]

    def kinds(self) -> list[str]:
        """The sequence as short names: event names, "bin", "close"."""
        out = []
        for kind, value in self.items:
            out.append(value["event"] if kind == "text" else kind)
        return out

    def audio(self, fmt: str = "wav") -> bytes:
        frames = self.frames[1:] if fmt == "wav" else self.frames
        return b"".join(frames)


def delivered_chars(log: Any) -> int:
    """Characters of the segments whose last frame reached the client, from the
    timestamp events of a request that did not complete (a failed one sends no closing
    ``segment_end`` of its own)."""
    spans = {
        e["seq"]: e["char_end"] - e["char_start"] for e in log.named("segment_start")
    }
    return sum(spans[e["seq"]] for e in log.named("segment_end"))


class Stream:
    """A WebSocket client of the TTS endpoint that records everything it receives."""

    def __init__(self, comm: WebsocketCommunicator) -> None:
        self.comm = comm
        self.log = Transcript()
        self.subprotocol: str | None = None

    async def send(self, message: dict[str, Any] | str | bytes) -> None:
        if isinstance(message, bytes):
            await self.comm.send_to(bytes_data=message)
        elif isinstance(message, str):
            await self.comm.send_to(text_data=message)
        else:
            await self.comm.send_to(text_data=json.dumps(message))

    async def next(self, timeout: float = 5) -> tuple[str, Any]:
        return self.record(await self.comm.receive_output(timeout=timeout))

    def record(self, out: dict[str, Any]) -> tuple[str, Any]:
        """Log one ASGI output message and return it as an item."""
        if out["type"] == "websocket.close":
            item: tuple[str, Any] = ("close", out.get("code", 1000))
        elif out.get("bytes") is not None:
            item = ("bytes", out["bytes"])
        else:
            item = ("text", json.loads(out["text"]))
        self.log.items.append(item)
        return item

    def drain(self) -> None:
        """Log what the server sent before the client went away, without waiting."""
        while not self.comm.output_queue.empty():
            self.record(self.comm.output_queue.get_nowait())

    async def until(
        self, predicate: Callable[[tuple[str, Any]], bool], timeout: float = 10
    ) -> tuple[str, Any]:
        while True:
            item = await self.next(timeout)
            if predicate(item) or item[0] == "close":
                return item

    async def event(self, name: str, timeout: float = 10) -> dict[str, Any]:
        kind, value = await self.until(
            lambda i: i[0] == "text" and i[1].get("event") == name, timeout
        )
        assert kind == "text", f"closed before {name}: {self.log.kinds()[-5:]}"
        return value

    async def closed(self, timeout: float = 10) -> int:
        kind, value = await self.until(lambda i: False, timeout)
        return value

    async def quiet(self, timeout: float = 0.2) -> bool:
        return await self.comm.receive_nothing(timeout=timeout)


Opener = Callable[..., Awaitable[Stream]]


@pytest.fixture
async def open_stream(api_key: str) -> AsyncIterator[Opener]:
    """Open TTS streams with the test key; they are disconnected at the end."""
    async with stream_opener(api_key) as opener:
        yield opener


@contextlib.asynccontextmanager
async def stream_opener(api_key: str) -> AsyncIterator[Opener]:
    """``open_stream`` for any event loop scope."""
    opened: list[Stream] = []

    async def opener(
        path: str = "/v1/tts/ws",
        headers: list[tuple[bytes, bytes]] | None = None,
        subprotocols: list[str] | None = None,
    ) -> Stream:
        comm = WebsocketCommunicator(
            application,
            path,
            headers=bearer(api_key) if headers is None else headers,
            subprotocols=subprotocols,
        )
        connected, subprotocol = await comm.connect()
        assert connected
        stream = Stream(comm)
        stream.subprotocol = subprotocol
        opened.append(stream)
        return stream

    try:
        yield opener
    finally:
        for stream in opened:
            await stream.comm.disconnect()


@pytest.fixture
def slow_fake(embedded_worker: WorkerRuntime) -> WorkerRuntime:
    """The fake engine paced at 20 ms per 100 ms chunk, so requests last a while."""
    embedded_worker.engines["tts"].engine.chunk_delay_s = 0.02
    return embedded_worker


# Accounts: plans, keys, records and limits for the metering tests (tts §12, accounts §5–§6).


@database_sync_to_async
def usage_records(account_id: int) -> list[Any]:
    """The account's usage records, oldest first."""
    from accounts.models.usage import UsageRecord

    return list(
        UsageRecord.objects.filter(account_id=account_id).order_by("started_at")
    )


@database_sync_to_async
def chars_used(account_id: int) -> int:
    """QuotaCounter.used of ``tts_characters`` (accounts Q3), all periods."""
    from accounts.models.quota import QuotaCounter

    rows = QuotaCounter.objects.filter(account_id=account_id, metric="tts_characters")
    return sum(rows.values_list("used", flat=True))


@database_sync_to_async
def open_records() -> int:
    """Records still ``started`` (Z3: none after every exit path)."""
    from accounts.models.usage import UsageRecord

    return UsageRecord.objects.filter(status="started").count()


async def lease_free(account_id: int) -> bool:
    """True when the account holds no concurrency lease: a probe with limit 1 fits."""
    from accounts.limits import get_limiter

    limiter = get_limiter()
    decision = await asyncio.to_thread(
        limiter.acquire_lease,
        member="probe",
        account_id=account_id,
        account_limit=1,
        ttl_ms=5000,
    )
    if decision.allowed:
        await asyncio.to_thread(
            limiter.release_lease, member="probe", account_id=account_id
        )
    return bool(decision.allowed)


def pcm_ms(frames: list[bytes], rate: int) -> int:
    """Audio ms of 16-bit PCM frames, floored on the total (accounts Q1)."""
    return sum(len(f) for f in frames) // 2 * 1000 // rate


# The vLLM tier: a tiny random Orpheus-layout checkpoint, built once per session.


@pytest.fixture(scope="session")
def tiny_orpheus(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """tts.worker.engines.tiny_orpheus checkpoint (model, snac, snac_24khz directories)."""
    from gateway.worker.vllm_env import vllm_installed

    if not vllm_installed():
        pytest.skip("the vLLM tier is not installed")  # the vllm marker fails it in CI
    from tts.worker.engines.tiny_orpheus import build_tiny_orpheus

    return build_tiny_orpheus(tmp_path_factory.mktemp("tiny-orpheus"))


def tiny_vllm_settings(tiny: Any, data_dir: Path) -> dict[str, Any]:
    """Settings that serve the tiny checkpoint with TTS_ENGINE=vllm (KV cache 1 GiB)."""
    return {
        "TTS_ENGINE": "vllm",
        "TTS_VLLM_MODEL": str(tiny.model),
        "TTS_SNAC_MODEL": str(tiny.snac),
        "TTS_SNAC_RANDOM_INIT": True,
        "TTS_VLLM_FORCE_SLOT_ORDER": True,  # random weights: keep frames well formed
        "TTS_VLLM_DTYPE": "float32",
        "TTS_VLLM_KV_CACHE_GIB": 1,
        "TTS_VLLM_MAX_MODEL_LEN": 2048,
        "TTS_VLLM_MAX_NUM_SEQS": 16,
        "TTS_SNAC_THREADS": 1,
        "TTS_SNAC_MAX_STEP": 1,  # windows independent of token timing: seeded audio repeats
        "DATA_DIR": data_dir,
    }


@dataclass
class LoadedVllm:
    """The session's vLLM engine and the settings it was loaded with."""

    engine: Any
    settings: dict[str, Any]


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def vllm_tts(
    tiny_orpheus: Any, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LoadedVllm]:
    """The vLLM engine on the tiny checkpoint, loaded once (in a thread, as the worker does).

    AsyncLLM serves the event loop that first uses it, so its tests run in the session loop.
    """
    from django.test import override_settings

    from tts.worker.engines import load_vllm

    values = tiny_vllm_settings(tiny_orpheus, tmp_path_factory.mktemp("vllm-data"))
    with override_settings(**values):
        engine = await asyncio.to_thread(load_vllm)
    yield LoadedVllm(engine, values)
    engine.close()


async def revoke_once_busy(
    runtime: WorkerRuntime, api_key: Any, *, reason: str, limit_s: float = 2
) -> None:
    """Revoke ``api_key`` as soon as the worker runs a TTS job (a request mid-synthesis)."""
    from accounts.models.api_keys import ApiKey
    from accounts.services.api_keys import api_key_revoke

    deadline = time.monotonic() + limit_s
    while not runtime.jobs.busy("tts"):
        assert time.monotonic() < deadline, "no TTS job started"
        await asyncio.sleep(0.01)
    await database_sync_to_async(api_key_revoke)(
        api_key=await ApiKey.objects.aget(pk=api_key.pk), actor=None, reason=reason
    )
