"""The embedded default's Celery beat: accounts' periodic tasks, run in-process (T3).

Without Redis there is no broker and no beat. The gateway's embedded start-up calls
``start_embedded_scheduler()`` in its event loop; each entry of ``CELERY_BEAT_SCHEDULE``
whose task is one of ``accounts.tasks.PERIODIC_TASKS`` then runs on its schedule, in a
thread (``asyncio.to_thread``), so the loop never blocks on the database.

The limits store of the embedded default is this process's memory, so a key revoked or edited
by another process (``manage.py revoke_api_key``) would never reach it: every
``KEY_VERSION_SYNC_S`` the scheduler copies the database's versions of the keys the store knows
into it, and streams and the principal cache see the change at their next check (A5, E7).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connections

logger = logging.getLogger(__name__)

Schedule = float | int | timedelta | Any  # seconds, a timedelta or a celery schedule


def seconds_until_next(schedule: Schedule, last_run: datetime) -> float:
    """Seconds from now until ``schedule`` is due again after ``last_run``."""
    if isinstance(schedule, int | float):
        interval = float(schedule)
    elif isinstance(schedule, timedelta):
        interval = schedule.total_seconds()
    else:  # celery.schedules.schedule or crontab
        return max(0.0, schedule.remaining_estimate(last_run).total_seconds())
    elapsed = (datetime.now(UTC) - last_run).total_seconds()
    return max(0.0, interval - elapsed)


def run_task(task: Callable[[], int]) -> int:
    """Run one task body in this thread with fresh database connections."""
    close_old_connections()
    try:
        return task()
    finally:
        connections.close_all()


async def _every(name: str, task: Callable[[], int], schedule: Schedule) -> None:
    last_run = datetime.now(UTC)
    while True:
        await asyncio.sleep(seconds_until_next(schedule, last_run))
        last_run = datetime.now(UTC)
        try:
            result = await asyncio.to_thread(run_task, task)
        except Exception:  # boundary: one run of one task; the next run retries
            logger.exception("periodic task %s failed", name)
        else:
            logger.debug("periodic task %s: %s", name, result)


def sync_key_versions() -> int:
    """One pass of the embedded key-version sync; 0 when the store is shared (Redis)."""
    from accounts.limits import MemoryLimiter, get_limiter
    from accounts.services.api_keys import api_key_versions_sync

    limiter = get_limiter()
    if not isinstance(limiter, MemoryLimiter):
        return 0
    key_ids = limiter.key_ids()
    return api_key_versions_sync(key_ids=key_ids) if key_ids else 0


async def run_schedule(entries: Mapping[str, Mapping[str, Any]]) -> None:
    """Run every known task of a beat schedule until cancelled, and the key sync."""
    from accounts.tasks import PERIODIC_TASKS

    loops = [_every("key_version_sync", sync_key_versions, settings.KEY_VERSION_SYNC_S)]
    for entry in entries.values():
        task = PERIODIC_TASKS.get(str(entry["task"]))
        if task is None:
            continue  # not an accounts task: its own app schedules it
        loops.append(_every(str(entry["task"]), task, entry["schedule"]))
    logger.info("embedded scheduler: %d periodic tasks", len(loops) - 1)
    await asyncio.gather(*loops)


def start_embedded_scheduler(
    schedule: Mapping[str, Mapping[str, Any]] | None = None,
) -> asyncio.Task[None]:
    """Start the periodic tasks in the running loop; cancel the task to stop them."""
    entries = settings.CELERY_BEAT_SCHEDULE if schedule is None else schedule
    return asyncio.get_running_loop().create_task(run_schedule(entries))
