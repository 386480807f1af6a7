"""Piper's session pool without the model: which session a run gets, and the core budget."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from tts.worker.engines.piper_sessions import (
    ARENA_SHRINK_KEY,
    SPIN_STOP_KEY,
    SPINNING_KEY,
    Demand,
    SessionPool,
    run_options,
    session_options,
    session_thread_counts,
    share_of_budget,
    trim_heap,
)


def pool(*counts: int, budget: int) -> SessionPool:
    return SessionPool({n: f"session-{n}" for n in counts}, budget)


def test_default_sessions_are_all_cores_and_one() -> None:
    assert session_thread_counts(2) == (2, 1)
    assert session_thread_counts(8) == (8, 1)
    assert session_thread_counts(1) == (1,)


def test_configured_sessions_are_clipped_to_the_budget_and_keep_one() -> None:
    assert session_thread_counts(8, [4, 2]) == (4, 2, 1)
    assert session_thread_counts(4, [16, 0]) == (4, 1)


@pytest.mark.parametrize(
    ("budget", "streams", "share"),
    [(2, 0, 2), (2, 1, 2), (2, 2, 1), (2, 16, 1), (8, 2, 4), (8, 3, 2)],
)
def test_share_of_budget(budget: int, streams: int, share: int) -> None:
    assert share_of_budget(budget, streams) == share


def test_session_options_set_the_thread_count() -> None:
    assert session_options(2, spinning=False).intra_op_num_threads == 2
    assert session_options(1, spinning=True).intra_op_num_threads == 1


@pytest.mark.parametrize("spinning", [True, False])
def test_wide_session_threads_spin_only_within_a_run(spinning: bool) -> None:
    opts = session_options(2, spinning=spinning)
    flag = "1" if spinning else "0"
    assert opts.get_session_config_entry(SPINNING_KEY) == flag
    # spinning after a run would take the core of a one-thread run starting beside it
    assert opts.get_session_config_entry(SPIN_STOP_KEY) == flag


def test_lease_picks_the_widest_session_within_want_and_free_cores() -> None:
    p = pool(8, 4, 1, budget=8)
    with p.lease(8) as first:
        assert first == "session-8"
        assert p.free == 0
    with p.lease(4) as wide, p.lease(4) as second:
        # the four-thread session serves one run at a time; the next run falls back to one
        assert (wide, second) == ("session-4", "session-1")
        assert p.free == 3
    assert p.free == 8


def test_a_pool_without_a_one_thread_session_is_refused() -> None:
    with pytest.raises(ValueError):
        SessionPool({2: "wide"}, 2)


def test_lease_waits_for_cores_and_never_exceeds_the_budget() -> None:
    p = pool(2, 1, budget=2)
    in_use: list[int] = []
    lock = threading.Lock()

    def run(want: int) -> None:
        with p.lease(want):
            with lock:
                in_use.append(p.budget - p.free)
            time.sleep(0.01)

    threads = [threading.Thread(target=run, args=(w,)) for w in (2, 1, 2, 1, 1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)

    assert len(in_use) == 6
    assert max(in_use) <= 2
    assert p.peak_threads <= 2
    assert p.free == 2
    assert sum(p.runs.values()) == 6


def test_without_waiting_a_one_thread_run_starts_beside_a_wide_run() -> None:
    p = SessionPool({2: "wide", 1: "one"}, 2, wait_for_cores=False)
    with p.lease(2) as wide, p.lease(1) as one:
        assert (wide, one) == ("wide", "one")
        assert p.peak_threads == 3  # the overlap this mode allows, one sentence long
    assert p.free == 2


def test_waiting_for_cores_a_one_thread_run_waits_for_the_wide_run() -> None:
    p = pool(2, 1, budget=2)
    started = threading.Event()

    def second() -> None:
        with p.lease(1):
            started.set()

    with p.lease(2):
        thread = threading.Thread(target=second)
        thread.start()
        assert not started.wait(0.05)
    thread.join(timeout=10)
    assert started.is_set()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_demand_holds_the_recent_peak_of_streams() -> None:
    clock = Clock()
    demand = Demand(1.0, clock)
    demand.enter()
    assert demand.current() == 1
    demand.enter()
    clock.now = 5.0  # two streams for five seconds
    demand.leave()
    assert demand.current() == 2  # the other stream left just now
    clock.now = 5.5
    assert demand.current() == 2
    clock.now = 6.0
    assert demand.current() == 1  # alone for the hold
    demand.leave()
    assert demand.current() == 1  # the peak of the last second
    clock.now = 7.5
    assert demand.current() == 0


def test_demand_without_hold_is_the_streams_now() -> None:
    demand = Demand(0.0)
    demand.enter()
    demand.enter()
    demand.leave()
    assert demand.current() == 1


def test_run_options_ask_for_the_arena_shrink_only_when_returning_memory() -> None:
    assert (
        run_options(return_memory=True).get_run_config_entry(ARENA_SHRINK_KEY)
        == "cpu:0"
    )
    with pytest.raises(RuntimeError):  # not set: the arena keeps its chunks
        run_options(return_memory=False).get_run_config_entry(ARENA_SHRINK_KEY)


def test_trim_heap_calls_glibc_malloc_trim() -> None:
    assert trim_heap() is True  # the gateway's images are glibc


@pytest.mark.parametrize(
    ("redis_url", "spinning"), [("", "True"), ("redis://x", "False")]
)
def test_spinning_is_on_by_default_only_in_the_embedded_topology(
    redis_url: str, spinning: str
) -> None:
    """Beside other workers and gateways on one host its threads would take their cores."""
    env = {**os.environ, "REDIS_URL": redis_url}
    code = "import veena_site.conf.decoding as d; print(d.TTS_PIPER_SPINNING)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == spinning
