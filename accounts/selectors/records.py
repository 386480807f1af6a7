"""The recent-requests table: the only dashboard read of UsageRecord (accounts D5, D6),
and whether an account has used the service at all (the dashboard's first-visit state).

Newest first, 50 a page, keyset-paginated on ``(started_at, id)`` so a page costs one
index range scan however deep it is, and no COUNT over the records.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q, QuerySet

from accounts.models.accounts import Account
from accounts.models.rollups import UsageRollup
from accounts.models.usage import UsageRecord
from accounts.selectors import Scope
from accounts.selectors.sources import narrowed

PAGE_SIZE = 50


@dataclass(frozen=True)
class RecordsPage:
    """One page of records and the cursor of the next (older) page."""

    records: list[UsageRecord]
    next_cursor: str | None


def encode_cursor(record: UsageRecord) -> str:
    """An opaque cursor that starts the next page after ``record``."""
    raw = f"{record.started_at.isoformat()}|{record.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """``(started_at, id)`` of a cursor; ``ValueError`` when it is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        moment, record_id = raw.split("|")
        started = datetime.fromisoformat(moment)
        if started.tzinfo is None:
            raise ValueError("naive")
        return started, uuid.UUID(record_id)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError("bad cursor") from exc


def account_has_usage(*, account: Account) -> bool:
    """Whether the account ever made a request (a record, or a rollup that outlived it)."""
    return (
        UsageRecord.objects.filter(account=account).exists()
        or UsageRollup.objects.filter(account=account).exists()
    )


def usage_records(
    *,
    scope: Scope,
    since: datetime,
    until: datetime,
    key_ids: Iterable[uuid.UUID] = (),
    routes: Iterable[str] = (),
    models: Iterable[str] = (),
    statuses: Iterable[str] = (),
    error_code: str = "",
    request_id: str = "",
) -> QuerySet[UsageRecord]:
    """The scope's records started in ``[since, until)`` under the filters, newest first.

    A ``request_id`` (the id an error body or a response header carried) is looked up
    whenever the request was made: the range does not apply to it.
    """
    records = UsageRecord.objects.all()
    if request_id:
        records = records.filter(request_id=request_id)
    else:
        records = records.filter(started_at__gte=since, started_at__lt=until)
    records = narrowed(
        records,
        scope=scope,
        key_ids=key_ids,
        routes=routes,
        models=models,
    )
    if statuses := list(statuses):
        records = records.filter(status__in=statuses)
    if error_code:
        records = records.filter(error_code=error_code)
    return records.select_related("api_key").order_by("-started_at", "-id")


def records_page(
    records: QuerySet[UsageRecord], *, cursor: str | None, size: int = PAGE_SIZE
) -> RecordsPage:
    """The page after ``cursor`` (the first page without one)."""
    if cursor:
        started, record_id = decode_cursor(cursor)
        records = records.filter(
            Q(started_at__lt=started) | Q(started_at=started, id__lt=record_id)
        )
    page = list(records[: size + 1])
    more = len(page) > size
    page = page[:size]
    return RecordsPage(page, encode_cursor(page[-1]) if more and page else None)
