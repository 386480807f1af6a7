"""The gateway's side of the usage journal (``accounts.journal``): note, land, retry.

``note`` keeps a record's latest counters (or how it ended) in the journal, off the event
loop, and never raises: a journal that cannot be written costs only the safety net.
``land`` writes a final entry to the database now; when the database refuses, the entry is
retried in the background, with backoff, until it lands (and, should this process die
first, the reaper of any process lands it from the journal).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from channels.db import database_sync_to_async
from django.db import DatabaseError, IntegrityError

from accounts.journal import JournalEntry, JournalUnavailable, Kind, get_journal
from accounts.services.settling import land_entry
from gateway.background import detached
from gateway.outages import log_failure

logger = logging.getLogger(__name__)

RETRY_FIRST_S = 0.5
RETRY_MAX_S = 10.0
# Background landings of this process, held so that they are not collected mid-retry.
_retrying: set[asyncio.Task[None]] = set()


async def note(entry: JournalEntry) -> bool:
    """Keep ``entry`` in the journal; False (logged) when the journal is unreachable."""
    try:
        await asyncio.to_thread(get_journal().put, entry)
    except JournalUnavailable as exc:
        logger.warning("usage journal: record %s not noted (%s)", entry.record.id, exc)
        return False
    return True


async def forget(record_id: uuid.UUID, *kinds: Kind) -> None:
    """Drop the record's journal entries (both kinds unless named); never raises."""
    try:
        await asyncio.to_thread(get_journal().drop, record_id, *kinds)
    except JournalUnavailable as exc:
        logger.warning("usage journal: record %s not dropped (%s)", record_id, exc)


async def land(entry: JournalEntry) -> bool | None:
    """Write the final ``entry``: True when it ended the record now, False when the record
    had already ended, None when the database refused and a retry was scheduled."""
    try:
        done = await database_sync_to_async(land_entry)(entry)
    except IntegrityError:
        logger.exception("usage record %s cannot land", entry.record.id)
        await forget(entry.record.id)
        return False
    except DatabaseError:
        log_failure(logger, "usage record %s not finalized: retrying", entry.record.id)
        land_later(entry)
        return None
    await forget(entry.record.id)
    return done


def land_later(entry: JournalEntry) -> None:
    """Retry ``entry`` in the background until it lands."""
    task = detached(_retry(entry))  # it outlives the request that ended the record
    _retrying.add(task)
    task.add_done_callback(_retrying.discard)


async def _retry(entry: JournalEntry) -> None:
    delay = RETRY_FIRST_S
    while True:
        await asyncio.sleep(delay)
        try:
            await database_sync_to_async(land_entry)(entry)
        except IntegrityError:
            logger.exception("usage record %s cannot land", entry.record.id)
            break
        except DatabaseError:
            delay = min(delay * 2, RETRY_MAX_S)
            continue
        logger.info("usage record %s finalized after a retry", entry.record.id)
        break
    await forget(entry.record.id)
