"""Times given to management commands on the command line."""

from __future__ import annotations

from datetime import UTC, datetime

from django.core.management.base import CommandError


def iso_moment(text: str, error: str) -> datetime:
    """``text``, an ISO 8601 date or time, as an aware datetime (UTC when it names no
    offset); a CommandError saying ``error`` when it is neither."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(error) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
