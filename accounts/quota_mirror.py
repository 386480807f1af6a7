"""Quota in the limits store's mirror (accounts Q5–Q8): the limit of the moment, and
reservations that seed the mirror from the database on a miss.

The limit is the plan's, or the account's override, plus the top-ups in effect, computed
from the windows the principal carries (``accounts.quota_limits``), so admission and the
reservations of a running stream apply overrides exactly as plan quotas.
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.utils import timezone

from accounts.auth import KeyPrincipal
from accounts.exceptions import AdmissionDenied
from accounts.limits import QuotaGrant, get_limiter, in_store
from accounts.models.choices import Endpoint, QuotaMetric
from accounts.quota_limits import effective_limit, plan_limit
from accounts.services.quota import quota_used


def quota_metric(endpoint: str) -> str:
    """The quota metric an endpoint uses (Q1)."""
    return (
        QuotaMetric.TTS_CHARACTERS
        if endpoint == Endpoint.TTS
        else QuotaMetric.ASR_AUDIO_MS
    )


def quota_limit(principal: KeyPrincipal, metric: str) -> int | None:
    """The monthly limit of ``metric`` now, in its unit, or None when unlimited (Q2): the
    plan's, or the account's override, plus the top-ups in effect."""
    return effective_limit(
        metric=metric,
        plan_limit=plan_limit(
            metric,
            tts_characters=principal.monthly_tts_characters,
            asr_seconds=principal.monthly_asr_seconds,
        ),
        windows=principal.quota_windows,
        at=timezone.now(),
    ).limit


async def reserve_quota(
    *,
    account_id: int,
    metric: str,
    period: str,
    amount: int,
    limit: int | None,
    partial: bool,
    holder: str | None = None,
) -> QuotaGrant:
    """Reserve in the mirror, seeding it from the database on a miss (Q5–Q8); a
    ``holder`` is credited with the grant (Q11)."""
    limiter = get_limiter()
    for _ in range(3):
        grant = await in_store(
            limiter.reserve_quota,
            account_id=account_id,
            metric=metric,
            period=period,
            amount=amount,
            limit=limit,
            partial=partial,
            holder=holder,
        )
        if grant is not None:
            return grant
        used = await database_sync_to_async(quota_used)(
            account_id=account_id, metric=metric, period=period
        )
        await in_store(
            limiter.seed_quota,
            account_id=account_id,
            metric=metric,
            period=period,
            used=used,
        )
    # The mirror vanished three times in a row: the store is losing data.
    raise AdmissionDenied("limits_unavailable")
