"""How current the usage pages are (issue 30: "as of" states the real time of the data).

A record counts in the rollups from the transaction that ends it, so every page includes
every request that ended before it was read, except ends still waiting in the usage journal
for the database (``accounts.journal``): the data is complete up to the oldest of them.
"""

from __future__ import annotations

import logging
from datetime import datetime

from accounts.journal import JournalUnavailable, get_journal

logger = logging.getLogger(__name__)

AS_OF_HEADER = "X-Data-As-Of"


def usage_complete_as_of(*, now: datetime) -> datetime | None:
    """The time up to which every ended request is in the rollups; None when the
    journal cannot be read (the page cannot tell)."""
    try:
        pending = get_journal().entries("final")
    except JournalUnavailable:
        logger.warning("usage journal unreachable: data as of unknown")
        return None
    return min([now, *(entry.noted_at for entry in pending)])
