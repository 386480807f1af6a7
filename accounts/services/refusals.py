"""Records of refused requests (issue 30 item 3, docs/accounting.md): zero units billed.

A refusal is a UsageRecord ended ``failed`` at once, with its error code, its request id and
the code the server sent. Past the first few of a key, route and code in an hour
(``accounts.refusals``), refusals are folded into one row per key, route, code and hour whose
``requests`` counts them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime

from django.db import transaction
from django.db.models import F

from accounts.models.choices import UsageStatus
from accounts.models.usage import UsageRecord
from accounts.services.quota import period_of
from accounts.services.rollup_deltas import ROW_FIELDS, rollup_apply
from accounts.services.rollups import floor_bucket

# Names the folded row of a key, route, code and hour, so every process adds to the same.
FOLDED_NAMESPACE = uuid.UUID("6f0e3d0a-30a1-4c6e-9f7b-5e1b2a3c4d30")


@dataclass(frozen=True)
class Refusal:
    """One refused request of an authenticated key."""

    account_id: int
    api_key_id: uuid.UUID
    endpoint: str
    route: str
    error_code: str
    request_id: str
    at: datetime
    close_code: int | None = None
    model: str = ""
    instance: str = ""

    def folded_id(self) -> uuid.UUID:
        """The id of the row that counts this refusal's key, route, code and hour."""
        hour = floor_bucket(self.at, "hour").isoformat()
        name = f"{self.api_key_id}|{self.route}|{self.error_code}|{hour}"
        return uuid.uuid5(FOLDED_NAMESPACE, name)


def _create(refusal: Refusal, *, record_id: uuid.UUID, requests: int) -> None:
    row = UsageRecord.objects.create(
        id=record_id,
        stream_id=record_id,
        request_id=refusal.request_id[:64],
        account_id=refusal.account_id,
        api_key_id=refusal.api_key_id,
        endpoint=refusal.endpoint,
        route=refusal.route,
        model=refusal.model[:100],
        status=UsageStatus.FAILED,
        error_code=refusal.error_code[:40],
        close_code=refusal.close_code,
        started_at=refusal.at,
        ended_at=refusal.at,
        last_checkpoint_at=refusal.at,
        period=period_of(refusal.at),
        instance=refusal.instance[:255],
        requests=requests,
    )
    after = UsageRecord.objects.filter(pk=row.pk).values(*ROW_FIELDS).get()
    rollup_apply(before=None, after=after, now=refusal.at)


def usage_refusal_record(*, refusal: Refusal) -> None:
    """One refusal as its own record (searchable by its request id)."""
    with transaction.atomic():
        _create(refusal, record_id=uuid.uuid4(), requests=1)


def usage_refusals_fold(*, refusal: Refusal, count: int) -> None:
    """Add ``count`` refusals like ``refusal`` to the row of its key, route, code and
    hour (created at the hour's start, with the latest request id folded into it)."""
    folded_id = refusal.folded_id()
    at = floor_bucket(refusal.at, "hour")
    with transaction.atomic():
        before = (
            UsageRecord.objects.select_for_update()
            .filter(pk=folded_id)
            .values(*ROW_FIELDS)
            .first()
        )
        if before is None:
            _create(replace(refusal, at=at), record_id=folded_id, requests=count)
            return
        UsageRecord.objects.filter(pk=folded_id).update(
            requests=F("requests") + count, request_id=refusal.request_id[:64]
        )
        after = {**before, "requests": before["requests"] + count}
        rollup_apply(before=before, after=after, now=refusal.at)
