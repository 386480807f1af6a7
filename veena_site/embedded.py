"""Run the worker consumer inside the current process (embedded default, and tests).

Channels' ``runworker`` needs a layer shared between processes (F14); with the in-memory layer the
worker must live in the gateway's own event loop, reading the same layer object.

One embedded server per data directory: its limits store, scheduler and reaper live in the
process, so two servers on one SQLite database would reap each other's live usage records.
``claim_data_dir`` takes an exclusive ``flock`` on ``DATA_DIR/server.lock`` for the life of the
process; the kernel drops it when the process ends, ``kill -9`` included.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
from pathlib import Path
from typing import IO

from channels.layers import get_channel_layer

from gateway.contracts import WORKER_CHANNELS, Kind
from gateway.layers.listener import ResilientWorker
from veena_site.routing import channel_router
from veena_site.runtime import WorkerRuntime, get_runtime

logger = logging.getLogger(__name__)

LOCK_NAME = "server.lock"
_claimed: dict[Path, IO[str]] = {}


class DataDirInUse(Exception):
    """Another embedded server holds the data directory."""


def claim_data_dir(data_dir: Path) -> None:
    """Hold ``data_dir`` for this process, or raise DataDirInUse (idempotent)."""
    data_dir = data_dir.resolve()
    if data_dir in _claimed:
        return
    handle = open(data_dir / LOCK_NAME, "a+")  # noqa: SIM115 (held until the process ends)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise DataDirInUse(
            f"another embedded server (pid {holder}) is running on DATA_DIR {data_dir}; "
            "stop it, or give this one another DATA_DIR"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    _claimed[data_dir] = handle


def worker_channels(kinds: list[Kind]) -> list[str]:
    """The shared channel names for the kinds this worker serves."""
    return [WORKER_CHANNELS[k] for k in kinds]


def start_runtime() -> tuple[WorkerRuntime, ResilientWorker]:
    """Start the process's runtime (engine loading, liveness); the runtime and the
    listener of its channels, not yet running."""
    runtime = get_runtime()
    runtime.start()
    worker = ResilientWorker(
        application=channel_router,
        channels=worker_channels(runtime.kinds),
        channel_layer=get_channel_layer(),
        aliases=runtime.listen_directly(),
    )
    return runtime, worker


def start_embedded_worker() -> asyncio.Task[None]:
    """Start the runtime (engine loading, liveness) and the channel listener in this loop."""
    runtime, worker = start_runtime()
    logger.info(
        "embedded worker %s serving %s", runtime.worker_id, ",".join(runtime.kinds)
    )
    return asyncio.get_event_loop().create_task(worker.arun())
