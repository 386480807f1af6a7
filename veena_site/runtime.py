"""The worker process's state: its engines (loaded once), its jobs and its liveness beacon."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from gateway.contracts import WORKER_CHANNELS, Kind
from gateway.liveness import WorkerStatus, get_liveness
from gateway.outages import log_failure
from gateway.worker.jobs import JobRegistry
from gateway.worker.vllm_env import EngineLoadError

logger = logging.getLogger(__name__)

BEACON_COALESCE_S = 0.005
BEACON_RETRY_S = 0.1


def load_engine(kind: Kind, name: str) -> Any:
    """Load the engine ``name`` of ``kind`` from its registry (blocking; call in a thread)."""
    if kind == "tts":
        from tts.worker.engines import ENGINES as TTS_ENGINES

        return TTS_ENGINES[name]()
    from asr.worker.engines import ENGINES as ASR_ENGINES

    return ASR_ENGINES[name]()


@dataclass
class EngineSlot:
    """One kind's engine: loading, ready or failed."""

    kind: Kind
    name: str
    engine: Any = None
    failed: bool = False
    loaded: asyncio.Event = field(default_factory=asyncio.Event)

    async def load(self) -> None:
        """Load the engine off the event loop, then warm it up; ready only after both.

        An engine may define ``async warm_up()`` (vLLM engines do: their first requests
        would otherwise pay one-time setup). A failure leaves the kind not ready; an
        ``EngineLoadError`` is logged as its one line, anything else with its traceback.
        """
        engine = None
        try:
            engine = await asyncio.to_thread(load_engine, self.kind, self.name)
            warm_up = getattr(engine, "warm_up", None)
            if warm_up is not None:
                await warm_up()
            self.engine = engine
            logger.info("%s engine %s loaded", self.kind, engine.model_version)
        except EngineLoadError as error:
            self.failed = True
            logger.error("%s engine %s failed to load: %s", self.kind, self.name, error)
        except Exception:  # boundary: one engine load
            self.failed = True
            logger.exception("%s engine %s failed to load", self.kind, self.name)
        finally:
            if self.engine is None and engine is not None:
                engine.close()
            self.loaded.set()


class WorkerRuntime:
    """Everything one worker process holds; one instance per process (see ``get_runtime``)."""

    def __init__(
        self, kinds: list[Kind], engines: dict[Kind, str], slots: dict[Kind, int]
    ) -> None:
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.kinds = kinds
        self.engines = {k: EngineSlot(kind=k, name=engines[k]) for k in kinds}
        self.jobs = JobRegistry(
            {k: slots[k] for k in kinds},
            settings.WORKER_HEARTBEAT_S,
            keepalive_timeout_s=settings.JOB_KEEPALIVE_TIMEOUT_S,
            on_change=self._slots_changed,
        )
        self.accepting = True
        # kind → this worker's own submission channel, once a listener reads it
        # (``listen_directly``); published in the liveness record for job placement.
        self.channels: dict[str, str] = {}
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start loading engines and publishing liveness (idempotent)."""
        if self._tasks:
            return
        self._tasks = [
            asyncio.create_task(slot.load()) for slot in self.engines.values()
        ]
        self._tasks.append(asyncio.create_task(self._beacon()))

    def direct_channels(self) -> dict[Kind, str]:
        """kind → the channel on which this worker takes submissions placed on it."""
        token = self.worker_id.rsplit(":", 1)[-1]
        return {k: f"{WORKER_CHANNELS[k]}.{os.getpid()}-{token}" for k in self.kinds}

    def listen_directly(self) -> dict[str, str]:
        """Advertise the direct channels (the caller listens on them); channel → shared name."""
        direct = self.direct_channels()
        self.channels = {str(k): channel for k, channel in direct.items()}
        self._slots_changed()
        return {channel: WORKER_CHANNELS[k] for k, channel in direct.items()}

    def engine(self, kind: Kind) -> Any | None:
        """The loaded engine for ``kind``, or None while loading / when not served."""
        slot = self.engines.get(kind)
        return slot.engine if slot is not None else None

    def status(self) -> WorkerStatus:
        """This worker's liveness record."""
        return WorkerStatus(
            worker_id=self.worker_id,
            kinds=list(self.kinds),
            ready={
                k: self.accepting and s.engine is not None
                for k, s in self.engines.items()
            },
            slots={k: n for k, n in self.jobs.slots.items()},
            busy={k: self.jobs.busy(k) for k in self.kinds},
            model_versions={
                k: s.engine.model_version for k, s in self.engines.items() if s.engine
            },
            channels=dict(self.channels),
        )

    async def wait_loaded(self) -> None:
        """Wait until every engine finished loading (or failed)."""
        await asyncio.gather(*(s.loaded.wait() for s in self.engines.values()))

    async def shutdown(self, drain_s: float = 0.0) -> None:
        """Stop accepting (published at once), let running jobs end by themselves for up
        to ``drain_s``, end the rest with a shutdown error, withdraw from liveness.

        The drain is what lets SIGTERM reach a whole deployment at once (systemd's
        ``KillMode=control-group``, a container runtime): the gateways' running requests
        finish within their own drain instead of failing as their workers go (issue 31).
        """
        self.accepting = False
        self._slots_changed()  # republish: not ready, so gateways place jobs elsewhere
        if drain_s > 0 and self.jobs.running:
            running = len(self.jobs.running)
            logger.info("worker %s draining %d job(s)", self.worker_id, running)
            left = await self.jobs.drain(drain_s)
            logger.info("worker %s drained; %d job(s) left", self.worker_id, left)
        await self.jobs.cancel_all(code="worker_shutdown")
        await self.jobs.wait_idle()
        for task in self._tasks:
            task.cancel()
        await get_liveness().withdraw(self.worker_id)
        for slot in self.engines.values():
            if slot.engine is not None:
                slot.engine.close()

    def _slots_changed(self) -> None:
        self._changed.set()

    async def _beacon(self) -> None:
        """Publish every ``WORKER_HEARTBEAT_S``, and soon after a slot is taken or freed,
        so that placement reads counts that are milliseconds old, not a second."""
        store = get_liveness()
        failing = False
        while True:
            self._changed.clear()
            try:
                await store.publish(self.status())
                if failing:
                    logger.info("liveness published again")
                failing = False
            except Exception:  # boundary: liveness must not kill the worker
                if not failing:
                    log_failure(logger, "liveness publish failed")
                failing = True
            # After a failure, try again soon: gateways place jobs only on workers they
            # see, and a restarted Redis has forgotten them all (issue 31).
            wait_s = BEACON_RETRY_S if failing else settings.WORKER_HEARTBEAT_S
            try:
                await asyncio.wait_for(self._changed.wait(), wait_s)
                await asyncio.sleep(BEACON_COALESCE_S)  # one publish for a burst
            except TimeoutError:
                pass


_runtime: WorkerRuntime | None = None


def get_runtime() -> WorkerRuntime:
    """The process's runtime, created on first use from settings."""
    global _runtime
    if _runtime is None:
        kinds: list[Kind] = [k for k in ("tts", "asr") if k in settings.WORKER_KINDS]
        _runtime = WorkerRuntime(
            kinds=kinds,
            engines={"tts": settings.TTS_ENGINE, "asr": settings.ASR_ENGINE},
            slots={"tts": settings.TTS_WORKER_SLOTS, "asr": settings.ASR_WORKER_SLOTS},
        )
    return _runtime


def reset_runtime() -> None:
    """Forget the process runtime (tests build a fresh one per test)."""
    global _runtime
    _runtime = None
