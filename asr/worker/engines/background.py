"""Native engine instances whose compute threads run at idle CPU priority.

A thread started by another inherits its scheduling class on Linux, and CTranslate2 starts its
worker threads (and their OpenMP teams) from the thread that builds the model. So a model built
in a thread that first lowered itself to ``SCHED_IDLE`` computes only on CPU time that nothing
else wants: its decodes cannot slow a foreground decode down, and need no interrupting. Python
threads are never lowered (a starved thread holding the GIL would stall the event loop); only
the native threads the builder starts are.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")
NICE_FALLBACK = 19  # where SCHED_IDLE is missing (not Linux), the lowest nice value


def lower_this_thread() -> str:
    """Move the calling thread to the idle class (or nice 19); returns what was applied."""
    tid = threading.get_native_id()
    try:
        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        return "idle"
    except (AttributeError, OSError):
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, tid, NICE_FALLBACK)
        return f"nice {NICE_FALLBACK}"
    except (AttributeError, OSError):
        return "normal"


def build_in_background(build: Callable[[], T]) -> T:
    """Call ``build`` in a short-lived thread at idle priority; threads it starts inherit it."""
    with ThreadPoolExecutor(1, thread_name_prefix="idle-build") as pool:
        applied = pool.submit(lower_this_thread).result()
        if applied == "normal":
            logger.warning(
                "background priority unavailable: chunk decodes run at normal"
            )
        return pool.submit(build).result()
