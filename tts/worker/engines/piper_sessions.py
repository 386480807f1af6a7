"""Piper's ONNX sessions by intra-op thread count, and the core budget the runs share (issue 13).

A lone stream runs each sentence on a session with every core's thread; many streams run one
thread each. A run leases a session whose thread count fits both what its share of the cores
allows (``want``) and the cores no other run holds, so the threads running at once never exceed
the budget. A session with more than one thread serves one run at a time (its intra-op pool
would be shared otherwise); the one-thread session serves any number, each on its caller's
thread. The sessions share the model's convolution filters (``SharedWeights``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy.typing as npt
import onnxruntime

from tts.worker.engines.onnx_weights import conv_filters

# ONNX Runtime's session config key for intra-op threads spinning after their work is done.
SPINNING_KEY = "session.intra_op.allow_spinning"
# ... and for their spinning to stop when a run ends (spinning only between a run's ops).
SPIN_STOP_KEY = "session.force_spinning_stop"
# ONNX Runtime's run config key: free the CPU arena's unused chunks when the run ends.
ARENA_SHRINK_KEY = "memory.enable_memory_arena_shrinkage"


def run_options(*, return_memory: bool) -> onnxruntime.RunOptions:
    """Options of one run; ``return_memory``: the session's free arena chunks are freed when
    it ends.

    Without it an arena keeps every chunk it ever grew to (a sentence's activations are tens
    of MiB), so resident memory stays at the most runs ever seen at once (issue 13). Asked on
    every run it costs 10-20 % RTF (the next run faults the pages in again).
    """
    options = onnxruntime.RunOptions()
    if return_memory:
        options.add_run_config_entry(ARENA_SHRINK_KEY, "cpu:0")
    return options


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``; None elsewhere (musl, macOS)."""
    name = ctypes.util.find_library("c")
    trim = getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    return trim  # type: ignore[no-any-return]


_TRIM = _malloc_trim()


def trim_heap() -> bool:
    """Hand the C heap's free pages back to the OS (the arena's freed chunks land there)."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


def session_thread_counts(
    budget: int, configured: Sequence[int] = ()
) -> tuple[int, ...]:
    """The sessions to build, widest first: ``configured`` clipped to the budget, else all and 1."""
    counts = {min(max(1, int(c)), budget) for c in configured} or {budget}
    counts.add(1)  # the session every run can fall back to
    return tuple(sorted(counts, reverse=True))


def share_of_budget(budget: int, streams: int) -> int:
    """Threads one run may use when ``streams`` streams share ``budget`` cores (at least one)."""
    return max(1, budget // max(1, streams))


class Demand:
    """Streams in the engine, held at their recent peak for ``hold_s`` (issue 13).

    Streams that alternate (one ends as another starts) would otherwise look alone for a
    moment and take every core for a sentence, which the next stream then waits for. Streams
    enter and leave on the event loop; runs ask ``current`` in the pool's threads as they start.
    """

    def __init__(
        self, hold_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.hold_s = hold_s
        self.streams = 0
        self._clock = clock
        self._peak = 0
        self._peak_at = clock()
        self._lock = threading.Lock()

    def enter(self) -> None:
        with self._lock:
            self.streams += 1
            self._note()

    def leave(self) -> None:
        with self._lock:
            self._note()  # there were this many until now
            self.streams -= 1

    def current(self) -> int:
        """The streams a run shares the cores with: now, or the peak of the last ``hold_s``."""
        with self._lock:
            self._note()
            if self._clock() - self._peak_at >= self.hold_s:
                self._peak, self._peak_at = self.streams, self._clock()
            return max(self.streams, self._peak)

    def _note(self) -> None:
        if self.streams >= self._peak:
            self._peak, self._peak_at = self.streams, self._clock()


class SharedWeights:
    """Tensors every session of a model runs on instead of its own copy (issue 13).

    Each session otherwise holds the model's weights: ~75 MiB more resident memory for Piper's
    second session, ~20 MiB with the filters shared, the speech bit-identical and no slower.
    The arrays and their OrtValues must outlive the sessions (ONNX Runtime keeps pointers to
    both), so the pool holds them.
    """

    def __init__(self, arrays: dict[str, npt.NDArray[Any]]) -> None:
        self.arrays = arrays
        self._values = {
            name: onnxruntime.OrtValue.ortvalue_from_numpy(array)
            for name, array in arrays.items()
        }

    @classmethod
    def read(cls, model: str | Path) -> SharedWeights:
        """The convolution filters of the ONNX file ``model``."""
        return cls(conv_filters(model))

    def add_to(self, opts: onnxruntime.SessionOptions) -> None:
        """Have the session built with ``opts`` run on these tensors."""
        for name, value in self._values.items():
            opts.add_initializer(name, value)


def session_options(
    threads: int, *, spinning: bool, weights: SharedWeights | None = None
) -> onnxruntime.SessionOptions:
    """Sequential execution on ``threads`` intra-op threads, the caller's thread included,
    on ``weights`` where given; ``spinning``: the threads spin between a run's ops, never
    after the run (a wide run's spinning would take the core of a run starting beside it)."""
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    if threads > 1:
        opts.add_session_config_entry(SPINNING_KEY, "1" if spinning else "0")
        opts.add_session_config_entry(SPIN_STOP_KEY, "1" if spinning else "0")
    if weights is not None:
        weights.add_to(opts)
    return opts


class SessionPool:
    """Sessions keyed by thread count; ``lease`` hands one out within the core budget."""

    def __init__(
        self,
        sessions: dict[int, Any],
        budget: int,
        *,
        wait_for_cores: bool = True,
        weights: SharedWeights | None = None,
    ) -> None:
        if 1 not in sessions:
            raise ValueError("a one-thread session is required")
        self.sessions = sessions
        self.weights = weights  # the tensors the sessions share, kept alive with them
        self.budget = budget
        self.free = budget
        # False: a one-thread run starts beside a wide run that is finishing instead of
        # waiting for its cores (at most ``budget`` one-thread runs still).
        self.wait_for_cores = wait_for_cores
        self._singles = 0
        self._busy: set[int] = set()  # wide sessions in use
        self.runs: Counter[int] = Counter()  # runs leased, by thread count
        self.peak_threads = 0  # most threads leased at once
        self._changed = threading.Condition()

    @classmethod
    def build(
        cls,
        factory: Callable[[onnxruntime.SessionOptions], Any],
        budget: int,
        counts: Sequence[int],
        *,
        spinning: bool,
        wait_for_cores: bool = True,
        weights: SharedWeights | None = None,
    ) -> SessionPool:
        """One session per thread count from ``factory(options)``, all on ``weights``."""
        sessions = {
            n: factory(session_options(n, spinning=spinning, weights=weights))
            for n in counts
        }
        return cls(sessions, budget, wait_for_cores=wait_for_cores, weights=weights)

    @contextmanager
    def lease(self, want: int) -> Iterator[Any]:
        """Block until a session of at most ``want`` threads fits the free cores; yield it."""
        with self._changed:
            self._changed.wait_for(lambda: self._pick(want) is not None)
            threads = self._pick(want)
            assert threads is not None
            self.free -= threads
            if threads > 1:
                self._busy.add(threads)
            else:
                self._singles += 1
            self.runs[threads] += 1
            self.peak_threads = max(self.peak_threads, self.budget - self.free)
        try:
            yield self.sessions[threads]
        finally:
            with self._changed:
                self.free += threads
                if threads > 1:
                    self._busy.discard(threads)
                else:
                    self._singles -= 1
                self._changed.notify_all()

    def _pick(self, want: int) -> int | None:
        """The widest idle session within ``want`` and the free cores; None when none fits."""
        limit = min(want, self.free)
        for threads in sorted(self.sessions, reverse=True):
            if threads > 1 and threads <= limit and threads not in self._busy:
                return threads
        if self.free >= 1 or (not self.wait_for_cores and self._singles < self.budget):
            return 1
        return None
