"""Records whose gateway could not end them: journaled ends landed, dead streams reaped.

Run by the reaper task (T1, every 30 s) in whichever process has it: every final entry of
the journal is written to its record (``usage_land``), and every started record whose stream
stopped reporting is settled — with its final entry when there is one, else marked
``abandoned`` with the latest counters known, the journal's live entry when it is newer
than the last database checkpoint (U10 as issue 30 amends it: never abandoned with less
than was served).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from uuid import UUID

from django.db import IntegrityError, transaction

from accounts.journal import Journal, JournalEntry, JournalUnavailable
from accounts.models.choices import UsageStatus
from accounts.models.usage import UsageRecord
from accounts.services.usage import (
    COUNTER_FIELDS,
    UsageCounters,
    usage_abandon,
    usage_land,
)

logger = logging.getLogger(__name__)

REAP_BATCH = 500  # records settled per run at most; the next run takes the rest


def land_entry(entry: JournalEntry) -> bool:
    """Write a final entry to its record; True when it landed now."""
    assert entry.end is not None
    return usage_land(
        record=entry.record,
        counters=entry.counters,
        end=entry.end,
        ended_at=entry.noted_at,
    )


def usage_journal_settle(
    *, journal: Journal, now: datetime, stale_seconds: float
) -> int:
    """Land every final entry, and forget live entries of records that ended (or that
    never opened and went quiet); return how many finals landed now."""
    landed = 0
    for entry in journal.entries("final"):
        try:
            landed += land_entry(entry)
        except IntegrityError:  # its account or key is gone: it can never land
            logger.exception("usage journal: record %s cannot land", entry.record.id)
        journal.drop(entry.record.id)
    cutoff = now - timedelta(seconds=stale_seconds)
    live = {entry.record.id: entry for entry in journal.entries("live")}
    open_ids = set(
        UsageRecord.objects.filter(
            pk__in=list(live), status=UsageStatus.STARTED
        ).values_list("id", flat=True)
    )
    existing = set(
        UsageRecord.objects.filter(pk__in=list(live)).values_list("id", flat=True)
    )
    for record_id, entry in live.items():
        ended = record_id in existing and record_id not in open_ids
        if ended or (record_id not in existing and entry.noted_at < cutoff):
            journal.drop(record_id, "live")
    return landed


def _abandon(record_id: UUID, live: JournalEntry | None, now: datetime) -> bool:
    """Mark one stale record ``abandoned`` with the newest counters known (U10)."""
    with transaction.atomic():
        row = (
            UsageRecord.objects.filter(pk=record_id, status=UsageStatus.STARTED)
            .values("last_checkpoint_at", *COUNTER_FIELDS)
            .first()
        )
        if row is None:
            return False
        checkpoint_at = row.pop("last_checkpoint_at")
        counters, ended_at = UsageCounters.from_fields(row), checkpoint_at
        if live is not None and live.noted_at > checkpoint_at:
            counters, ended_at = live.counters, live.noted_at
        return usage_abandon(
            record_id=record_id, counters=counters, ended_at=ended_at, now=now
        )


def usage_reap_abandoned(
    *, now: datetime, stale_seconds: float, journal: Journal | None = None
) -> int:
    """Settle every started record not checkpointed for ``stale_seconds`` whose stream
    no longer reports either; return how many were marked ``abandoned``.

    A journal that cannot be read stops the run: abandoning without it could bill less
    than was served, and the next run tries again.
    """
    cutoff = now - timedelta(seconds=stale_seconds)
    stale = list(
        UsageRecord.objects.filter(
            status=UsageStatus.STARTED, last_checkpoint_at__lt=cutoff
        ).values_list("id", flat=True)[:REAP_BATCH]
    )
    reaped = 0
    try:
        for record_id in stale:
            final = journal.get(record_id, "final") if journal else None
            live = journal.get(record_id, "live") if journal else None
            if final is not None:
                land_entry(final)
            elif live is not None and live.noted_at >= cutoff:
                continue  # its gateway still reports it: alive, only its checkpoints fail
            else:
                reaped += _abandon(record_id, live, now)
            if journal is not None:
                journal.drop(record_id)
    except JournalUnavailable:
        logger.warning("usage journal unreachable: reaping postponed")
    if reaped:
        logger.warning("reaped %d abandoned usage records", reaped)
    return reaped
