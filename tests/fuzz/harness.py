"""The fuzz rig: the real ASGI application, the embedded worker (fake engines), one key, and
the checks that every case left nothing behind.

A hypothesis test is a plain sync test that hands each generated case to ``Rig.run``, which
drives it on the rig's own event loop (one loop, worker and key for the whole run, so a case
costs a socket, not a process). After every case the rig waits until the stream's resources
are back (gauge, worker slots, lease, ``started`` records, tasks) and fails the case otherwise;
a traceback logged at ERROR or an exception escaping the application fails it too.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from django.db.backends.signals import connection_created

from tests.support.leaks import active_streams, started_records

# CI runs FUZZ_EXAMPLES per endpoint (2,000 by default); `make fuzz` runs 10,000.
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "2000"))
SETTLE_S = 5.0
FULL_CHECK_EVERY = 20  # cases between lease / record checks (and after the last case)


class Traces(logging.Handler):
    """Collects every record at ERROR or above (tracebacks, asgiref's "Exception inside
    application" of a worker instance that died), and every error of the rig's own loop.

    The ``asyncio`` logger is left out: it also reports tasks of earlier tests' loops that
    the garbage collector happens to destroy during the run. The rig's loop reports its own
    errors (a task exception never retrieved, a callback that raised) to ``loop_error``.
    """

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name != "asyncio":
            self.records.append(record)

    def loop_error(
        self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]
    ) -> None:
        exc = context.get("exception")
        self.records.append(
            logging.LogRecord(
                "asyncio",
                logging.ERROR,
                __file__,
                0,
                context.get("message", "loop error"),
                None,
                (type(exc), exc, exc.__traceback__) if exc else None,
            )
        )


@dataclass
class Rig:
    """One loop, worker, key and account for a whole fuzz run."""

    loop: asyncio.AbstractEventLoop
    runtime: Any = None
    raw_key: str = ""
    account_id: int = 0
    traces: Traces = field(default_factory=Traces)
    baseline_tasks: Counter[str] = field(default_factory=Counter)
    baseline_streams: dict[str, float] = field(default_factory=dict)
    cases: int = 0
    started: float = field(default_factory=time.monotonic)

    def call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run a coroutine on the rig's loop."""
        return self.loop.run_until_complete(coro)

    def run(self, case: Callable[[Rig], Awaitable[None]]) -> None:
        """Drive one case, then check that it left nothing behind."""
        self.cases += 1
        seen = len(self.traces.records)
        self.call(self._run(case))
        new = self.traces.records[seen:]
        assert not new, f"traceback logged: {new[0].getMessage()}"

    async def _run(self, case: Callable[[Rig], Awaitable[None]]) -> None:
        from accounts.refusals import flush_refusals

        await case(self)
        # Fold the refusals counted now rather than wait out the fold's second (issue 30):
        # its task is the process's, not the case's.
        await flush_refusals()
        await self.assert_clean(full=self.cases % FULL_CHECK_EVERY == 0)

    async def assert_clean(self, *, full: bool = True) -> None:
        """Gauges, slots, sockets and tasks are all back (issue 9); with ``full`` also the
        lease and the ``started`` records, which cost a thread hop each."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            left = await self.leftovers(full=full)
            if not left:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"left behind after the case: {left}")
            await asyncio.sleep(0.002)

    async def leftovers(self, *, full: bool) -> dict[str, Any]:
        from accounts.limits import get_limiter
        from gateway.server import lifecycle

        left: dict[str, Any] = {}
        for endpoint in ("tts", "asr"):
            open_now = active_streams(endpoint) - self.baseline_streams[endpoint]
            if open_now:
                left[f"active_streams[{endpoint}]"] = open_now
            if self.runtime.jobs.busy(endpoint):
                left[f"worker_slots[{endpoint}]"] = self.runtime.jobs.busy(endpoint)
        if lifecycle.live_streams():
            left["live_sockets"] = lifecycle.live_streams()
        extra = Counter(task_kinds(self.loop)) - self.baseline_tasks
        if extra:
            left["tasks"] = dict(extra)
        if left or not full:
            return left
        decision = await asyncio.to_thread(
            get_limiter().acquire_lease,
            member="fuzz-probe",
            account_id=self.account_id,
            account_limit=1,
            ttl_ms=5000,
        )
        if not decision.allowed:
            return {"lease": "held"}
        await asyncio.to_thread(
            get_limiter().release_lease, member="fuzz-probe", account_id=self.account_id
        )
        if await started_records():
            left["started_records"] = await started_records()
        return left

    def report(self, endpoint: str) -> None:
        """Check everything once more after the last case, and print the count."""
        self.call(self.assert_clean())
        took = time.monotonic() - self.started
        print(f"\nfuzz {endpoint}: {self.cases} cases in {took:.1f} s, 0 leaks")


def task_kinds(loop: asyncio.AbstractEventLoop) -> list[str]:
    """The pending tasks of ``loop`` (but the caller's) by coroutine name.

    Counted by kind, not identity: the worker's long-lived consumer instances replace their
    receive tasks after every message they take.
    """
    current = asyncio.current_task(loop)
    return [
        getattr(t.get_coro(), "__qualname__", "?")
        for t in asyncio.all_tasks(loop)
        if t is not current and not t.done()
    ]


async def send_frame(comm: Any, frame: str | bytes) -> None:
    """One client frame as Daphne delivers it (empty frames included)."""
    key = "bytes" if isinstance(frame, bytes) else "text"
    await comm.send_input({"type": "websocket.receive", key: frame})


async def warm_up(rig: Rig) -> None:
    """One TTS request and one realtime session, so the worker's per-channel consumer
    instances (long-lived by design) exist before the baseline of tasks is taken."""
    from channels.testing import WebsocketCommunicator

    from veena_site.asgi import application

    headers = [(b"authorization", b"Bearer " + rig.raw_key.encode())]
    for path, first in (
        ("/v1/tts/ws", '{"text": "Warm up."}'),
        ("/v1/realtime", '{"type": "input_audio_buffer.clear"}'),
    ):
        comm = WebsocketCommunicator(application, path, headers=headers)
        assert (await comm.connect(timeout=5))[0]
        await comm.send_to(text_data=first)
        await comm.receive_output(timeout=5)
        await comm.disconnect()
    while rig.runtime.jobs.busy("tts") or rig.runtime.jobs.busy("asr"):
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)


def _fast_sqlite(sender: Any, connection: Any, **kwargs: Any) -> None:
    """The run's throwaway SQLite file need not survive a power cut: no fsync per commit."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA synchronous=OFF")


def make_rig(keyed: Callable[..., Awaitable[tuple[Any, str]]]) -> Rig:
    """Start the loop, the embedded worker and a key with limits no case reaches."""
    loop = asyncio.new_event_loop()
    if os.environ.get("FUZZ_DEBUG"):
        loop.set_debug(True)
    asyncio.set_event_loop(loop)
    gc.collect()  # earlier tests' garbage is destroyed now, not during the run
    rig = Rig(loop=loop)
    loop.set_exception_handler(rig.traces.loop_error)
    rig.baseline_streams = {e: active_streams(e) for e in ("tts", "asr")}
    logging.getLogger().addHandler(rig.traces)
    connection_created.connect(_fast_sqlite)

    async def setup() -> None:
        from veena_site.embedded import start_embedded_worker
        from veena_site.runtime import get_runtime

        start_embedded_worker()
        rig.runtime = get_runtime()
        await rig.runtime.wait_loaded()
        key, rig.raw_key = await keyed(
            {"requests_per_minute": 10_000, "max_concurrent_streams": 4}
        )
        rig.account_id = key.account_id
        await warm_up(rig)
        rig.baseline_tasks = Counter(task_kinds(rig.loop))

    rig.call(setup())
    return rig


def close_rig(rig: Rig) -> None:
    """Stop the worker and the loop; the rig's handler leaves the root logger."""

    async def teardown() -> None:
        await rig.runtime.shutdown()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        await database_sync_to_async(lambda: None)()

    try:
        rig.call(teardown())
    finally:
        logging.getLogger().removeHandler(rig.traces)
        connection_created.disconnect(_fast_sqlite)
        rig.loop.close()
        asyncio.set_event_loop(None)
