"""One vLLM ``AsyncLLM`` inside the worker process, shared by the vLLM engines (ASR, TTS).

``VllmRunner.load`` builds the engine from a ``VllmConfig`` (blocking: call it in a thread, as the
worker's engine loader does; the engine core starts as a spawned child process, so the entry
module must be import-safe). ``generate`` streams a request's outputs and aborts the request
in the engine when the caller stops early: a cancelled task, a closed generator or an exception.
``stats`` counts what the engine itself reports per step (requests scheduled together, encoder
inputs, finished requests) and the aborts this runner issued, so tests and benchmarks can see
that concurrent requests ran in one engine step. ``close`` shuts the engine core down and removes
the IPC socket directory vLLM would otherwise leave in the temp directory.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.worker.vllm_env import prepare_vllm

if TYPE_CHECKING:
    from vllm import RequestOutput, SamplingParams
    from vllm.v1.engine.async_llm import AsyncLLM

logger = logging.getLogger(__name__)

GIB = 1 << 30
IPC_PREFIX = "veena-vllm-"
SHUTDOWN_TIMEOUT_S = 5.0
RECENT_STEPS = 4096
FINAL_PRIORITY = 0  # vLLM's priority policy runs lower values first
BACKGROUND_PRIORITY = 1


@dataclass(frozen=True)
class VllmConfig:
    """What an engine needs to start vLLM; built from one engine's settings."""

    what: str  # names the setting in errors, e.g. "ASR_ENGINE=vllm"
    model: Path
    data_dir: Path
    dtype: str = "auto"
    max_model_len: int | None = None
    max_num_seqs: int = 8
    max_num_batched_tokens: int | None = None
    kv_cache_gib: float = 1.0
    enforce_eager: bool = True
    priority: bool = True  # vLLM's priority scheduling policy
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # more AsyncEngineArgs

    def engine_args(self) -> dict[str, Any]:
        """Keyword arguments of ``AsyncEngineArgs``; ``extra`` wins."""
        args: dict[str, Any] = {
            "model": str(self.model),
            "tokenizer": str(self.model),
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "kv_cache_memory_bytes": int(self.kv_cache_gib * GIB),
            "enforce_eager": self.enforce_eager,
            "scheduling_policy": "priority" if self.priority else "fcfs",
            "seed": self.seed,
            # Stats reach only our logger (below), never a periodic log line.
            "disable_log_stats": True,
            "enable_logging_iteration_details": True,
        }
        return args | self.extra


@dataclass(frozen=True)
class Step:
    """One engine step as the engine reported it."""

    number: int
    batch: int  # requests scheduled in this step (prefill and decode)
    encoder_inputs: int  # audio (or image) inputs encoded in this step
    running: int  # requests the scheduler held running after it
    waiting: int


@dataclass
class RunnerStats:
    """The engine's own per-step statistics, and the requests this runner started and aborted.

    ``steps``, ``batched_steps`` and the ``recent`` steps come from vLLM's ``SchedulerStats``
    (with iteration details); ``finished`` from its ``IterationStats``. ``started`` and
    ``aborted`` count per request kind (the ``kind`` given to ``generate``).
    """

    steps: int = 0
    batched_steps: int = 0  # steps that ran two or more requests together
    max_batch: int = 0
    finished: int = 0
    started: Counter[str] = field(default_factory=Counter)
    aborted: Counter[str] = field(default_factory=Counter)
    recent: deque[Step] = field(default_factory=lambda: deque(maxlen=RECENT_STEPS))

    def since(self, step: int) -> list[Step]:
        """The recent steps after step number ``step``."""
        return [s for s in self.recent if s.number > step]

    def on_step(self, scheduler: Any, iteration: Any) -> None:
        """Fold one engine step's ``SchedulerStats`` / ``IterationStats`` in."""
        if iteration is not None:
            self.finished += len(iteration.finished_requests)
        details = None if scheduler is None else scheduler.iteration_details
        if details is None or details.is_dummy:
            return
        batch = details.num_ctx_requests + details.num_generation_requests
        self.steps += 1
        self.batched_steps += batch >= 2
        self.max_batch = max(self.max_batch, batch)
        self.recent.append(
            Step(
                number=self.steps,
                batch=batch,
                encoder_inputs=details.num_encoder_inputs,
                running=scheduler.num_running_reqs,
                waiting=scheduler.num_waiting_reqs,
            )
        )


def stats_logger_factory(stats: RunnerStats) -> Any:
    """A vLLM ``StatLoggerBase`` factory whose loggers write into ``stats``."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class StatsLogger(StatLoggerBase):
        """Receives each step's statistics in the frontend process."""

        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            self.engine_index = engine_index

        def record(
            self,
            scheduler_stats: Any,
            iteration_stats: Any,
            mm_cache_stats: Any = None,
            engine_idx: int = 0,
        ) -> None:
            stats.on_step(scheduler_stats, iteration_stats)

        def log_engine_initialized(self) -> None:
            """Nothing to log."""

    return StatsLogger


class IpcDirectory:
    """The process's directory for vLLM's ZMQ sockets, removed when its last engine closes.

    vLLM reads ``VLLM_RPC_BASE_PATH`` whenever an engine creates its sockets, so every engine
    of the process shares one directory; those left by dead processes are removed.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._path: Path | None = None
        self._users = 0

    def acquire(self) -> Path:
        """The directory (created on first use), exported to vLLM."""
        with self._lock:
            if self._path is None:
                base = Path(tempfile.gettempdir())
                for stale in base.glob(f"{IPC_PREFIX}*"):
                    pid = stale.name.removeprefix(IPC_PREFIX).split("-", 1)[0]
                    if pid.isdigit() and not _alive(int(pid)):
                        shutil.rmtree(stale, ignore_errors=True)
                prefix = f"{IPC_PREFIX}{os.getpid()}-"
                self._path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
                os.environ["VLLM_RPC_BASE_PATH"] = str(self._path)
            self._users += 1
            return self._path

    def release(self) -> None:
        """One engine less; the last one removes the directory."""
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._path is not None:
                shutil.rmtree(self._path, ignore_errors=True)
                # The next engine gets a new directory; none may bind into this removed one.
                if os.environ.get("VLLM_RPC_BASE_PATH") == str(self._path):
                    del os.environ["VLLM_RPC_BASE_PATH"]
                self._path = None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


IPC = IpcDirectory()


class OpenEngines:
    """Every ``AsyncLLM`` this process started and has not shut down; shut down at exit.

    vLLM's engine core is a non-daemon child process: one engine left open keeps the
    interpreter waiting at exit for ever (``multiprocessing`` joins its children), as a worker
    whose loader failed after its engine started or a test session whose fixture never reached
    its close did (CI ran out of time after the suite's summary). The exit hook is registered
    with the first engine, after vLLM imported ``multiprocessing``, so it runs before the join.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engines: list[Any] = []
        self._hooked = False

    def start(self, build: Callable[[], Any]) -> Any:
        """Run ``build()`` (it starts an engine) with the IPC directory held; track the engine."""
        IPC.acquire()
        try:
            engine = build()
        except BaseException:
            IPC.release()
            raise
        with self._lock:
            self._engines.append(engine)
            if not self._hooked:
                atexit.register(self.shutdown_all)
                self._hooked = True
        return engine

    def shutdown(self, engine: Any) -> None:
        """Shut one tracked engine down (bounded wait) and release its IPC hold; idempotent."""
        with self._lock:
            if not any(e is engine for e in self._engines):
                return
            self._engines = [e for e in self._engines if e is not engine]
        try:
            engine.shutdown(timeout=SHUTDOWN_TIMEOUT_S)
        finally:
            IPC.release()

    def open_count(self) -> int:
        """Engines started and not yet shut down."""
        with self._lock:
            return len(self._engines)

    def shutdown_all(self) -> None:
        """Shut down every engine still open (the exit hook)."""
        with self._lock:
            left = list(self._engines)
        for engine in left:
            logger.warning("a vLLM engine was still open at exit; shutting it down")
            try:
                self.shutdown(engine)
            except Exception:  # boundary: exit goes on; the engine core dies with us
                logger.exception("vLLM engine shutdown at exit failed")


ENGINES = OpenEngines()


class VllmRunner:
    """A loaded ``AsyncLLM`` and its statistics; one per engine per worker process."""

    def __init__(self, engine: AsyncLLM, stats: RunnerStats) -> None:
        self._engine: AsyncLLM | None = engine
        self.stats = stats

    @property
    def engine(self) -> AsyncLLM:
        """The running ``AsyncLLM``."""
        if self._engine is None:
            raise RuntimeError("the vLLM engine is closed")
        return self._engine

    @classmethod
    def load(cls, config: VllmConfig) -> VllmRunner:
        """Start the engine (blocking, tens of seconds on CPU); raise on any failure."""
        prepare_vllm(what=config.what, data_dir=config.data_dir)
        from vllm import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        started = time.monotonic()
        stats = RunnerStats()
        # No local name for the engine: something in vLLM keeps this frame alive, and
        # a reference from it would defer AsyncLLM.__del__ to interpreter exit.
        runner = cls(
            ENGINES.start(
                lambda: AsyncLLM.from_engine_args(
                    AsyncEngineArgs(**config.engine_args()),
                    stat_loggers=[stats_logger_factory(stats)],
                )
            ),
            stats,
        )
        logger.info(
            "vLLM engine for %s loaded in %.1f s",
            config.what,
            time.monotonic() - started,
        )
        return runner

    async def generate(
        self,
        prompt: Any,
        params: SamplingParams,
        *,
        priority: int = FINAL_PRIORITY,
        kind: str = "req",
    ) -> AsyncIterator[RequestOutput]:
        """Outputs of one request; stopping early (cancel, close, error) aborts it."""
        request_id = f"{kind}-{uuid.uuid4().hex}"
        self.stats.started[kind] += 1
        finished = False
        try:
            stream = self.engine.generate(prompt, params, request_id, priority=priority)
            async with aclosing(stream):
                async for output in stream:
                    finished = output.finished
                    yield output
        finally:
            if not finished:
                self.stats.aborted[kind] += 1
                await self.engine.abort(request_id)  # idempotent after generate's own

    async def complete(
        self,
        prompt: Any,
        params: SamplingParams,
        *,
        priority: int = FINAL_PRIORITY,
        kind: str = "req",
    ) -> RequestOutput:
        """The final output of one request (``params`` should be FINAL_ONLY or CUMULATIVE)."""
        last = None
        async for output in self.generate(prompt, params, priority=priority, kind=kind):
            last = output
        assert last is not None and last.finished
        return last

    def unfinished(self) -> int:
        """Requests the engine has not finished or aborted (vLLM's own count)."""
        return int(self.engine.get_num_unfinished_requests())

    def close(self) -> None:
        """Shut the engine core down and remove its socket directory (idempotent)."""
        engine, self._engine = self._engine, None
        if engine is None:
            return
        try:
            ENGINES.shutdown(engine)
        finally:
            # Dropped now, AsyncLLM.__del__ (a second shutdown) runs while its modules
            # still exist; at interpreter exit it would fail noisily.
            del engine
