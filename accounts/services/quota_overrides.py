"""Operators' quota controls, each audited once: per-account overrides of a plan's monthly
limit, top-ups on top of it, and corrections of a quota counter.

An override or a top-up changes what admission allows, so it bumps the version of every key
of the account: every gateway process reloads the principal, with the account's quota
windows, at its next connection, and open streams at their next check (A6, E6). Admission
then computes the limit of the moment from those windows (``accounts.quota_limits``), so a
top-up that runs out needs no reload.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.exceptions import LimitsUnavailable
from accounts.limits import get_limiter
from accounts.models.accounts import Account
from accounts.models.choices import (
    QUOTA_UNITS,
    AuditAction,
    QuotaOverrideKind,
    operator_units,
    stored_units,
)
from accounts.models.quota import QuotaAdjustment, QuotaCounter, QuotaOverride
from accounts.services.api_keys import account_key_versions_bump
from accounts.services.audit import audit_log_write
from accounts.services.quota import quota_add

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)


def override_name(override: QuotaOverride) -> str:
    """How the audit log and the admin name an override: "TTS characters +5,000 until …"."""
    until = override.ends_at
    return f"{override}{'' if until is None else f' until {until:%Y-%m-%d %H:%M} UTC'}"


def _require_reason(reason: str) -> str:
    if not reason.strip():
        raise ValidationError({"reason": "Say why: the reason goes in the audit log."})
    return reason.strip()


# What ``quota.override_created`` records of a new override.
OVERRIDE_FIELDS = ("metric", "kind", "amount", "starts_at", "ends_at")


def quota_override_create(
    *,
    account: Account,
    metric: str,
    kind: str,
    amount: int | None,
    ends_at: datetime | None,
    reason: str,
    actor: User | None,
    actor_label: str,
    now: datetime | None = None,
) -> QuotaOverride:
    """Give ``account`` its own monthly limit of ``metric`` (``kind="limit"``; ``amount``
    None: unlimited), or ``amount`` extra units until ``ends_at`` (``kind="top_up"``).

    A new limit ends the account's earlier limits of the metric, in the same entry.
    """
    moment = now or timezone.now()
    override = QuotaOverride(
        account=account,
        metric=metric,
        kind=kind,
        amount=amount,
        starts_at=moment,
        ends_at=ends_at,
        reason=_require_reason(reason),
        created_at=moment,
        created_by=actor,
    )
    _validate(override, moment)
    with transaction.atomic():
        Account.objects.select_for_update().get(pk=account.pk)
        replaced = _end_limits(override) if kind == QuotaOverrideKind.LIMIT else []
        override.save(force_insert=True)
        account_key_versions_bump(account)
        changes: dict[str, tuple[object, object]] = {
            name: (None, getattr(override, name)) for name in OVERRIDE_FIELDS
        }
        if replaced:
            changes["replaces"] = (None, replaced)
        _audit(
            override, AuditAction.QUOTA_OVERRIDE_CREATED, changes, actor, actor_label
        )
    return override


def _validate(override: QuotaOverride, moment: datetime) -> None:
    override.full_clean()
    if override.ends_at is not None and override.ends_at <= moment:
        raise ValidationError({"ends_at": "Pick a moment in the future."})


def _end_limits(new: QuotaOverride) -> list[int]:
    """End the account's limits of the new one's metric still in effect; their ids."""
    live = QuotaOverride.objects.filter(
        Q(ends_at__isnull=True) | Q(ends_at__gt=new.starts_at),
        account=new.account,
        metric=new.metric,
        kind=QuotaOverrideKind.LIMIT,
    )
    ids = list(live.values_list("pk", flat=True))
    live.update(ends_at=new.starts_at)
    return ids


def _audit(
    override: QuotaOverride,
    action: AuditAction,
    changes: Mapping[str, tuple[object, object]],
    actor: User | None,
    actor_label: str,
    reason: str | None = None,
) -> None:
    audit_log_write(
        actor=actor,
        actor_label=actor_label,
        action=action,
        account=override.account,
        object_type="quota_override",
        object_id=str(override.pk),
        object_name=override_name(override),
        changes=changes,
        reason=override.reason if reason is None else reason,
    )


def quota_override_end(
    *,
    override: QuotaOverride,
    reason: str,
    actor: User | None,
    actor_label: str,
    now: datetime | None = None,
) -> QuotaOverride:
    """End an override or top-up now; the row stays, with its end."""
    moment = now or timezone.now()
    reason = _require_reason(reason)
    with transaction.atomic():
        locked = QuotaOverride.objects.select_for_update().get(pk=override.pk)
        if locked.ends_at is not None and locked.ends_at <= moment:
            raise ValidationError("This override has already ended.")
        before = locked.ends_at
        locked.ends_at = max(moment, locked.starts_at)
        locked.save(update_fields=["ends_at"])
        account_key_versions_bump(locked.account)
        changes = {"ends_at": (before, locked.ends_at)}
        _audit(
            locked,
            AuditAction.QUOTA_OVERRIDE_ENDED,
            changes,
            actor,
            actor_label,
            reason,
        )
    return locked


def quota_counter_adjust(
    *,
    account: Account,
    metric: str,
    period: str,
    amount: int,
    reason: str,
    actor: User | None,
    actor_label: str,
    now: datetime | None = None,
) -> QuotaAdjustment:
    """Add ``amount`` (the metric's operator unit; negative credits usage back) to the
    account's counter of ``period``, keep it as a QuotaAdjustment and, on commit, move the
    limits store's mirror by as much (Q3, Q5)."""
    moment = now or timezone.now()
    adjustment = QuotaAdjustment(
        account=account,
        period=period,
        metric=metric,
        amount=amount,
        reason=_require_reason(reason),
        created_at=moment,
        created_by=actor,
    )
    adjustment.full_clean()
    delta = stored_units(metric, amount)
    with transaction.atomic():
        counter = _counter_for(adjustment, delta)
        adjustment.save(force_insert=True)
        quota_add(
            account_id=account.pk, period=period, deltas={metric: delta}, now=moment
        )
        audit_log_write(
            actor=actor,
            actor_label=actor_label,
            action=AuditAction.QUOTA_ADJUSTED,
            account=account,
            object_type="quota_counter",
            object_id=str(counter.pk),
            object_name=f"{account.name} {period} {counter.get_metric_display()}",
            changes={
                "used": (counter.used, counter.used + delta),
                "amount": (None, amount),
            },
            reason=adjustment.reason,
        )
        transaction.on_commit(lambda: _move_mirror(account.pk, metric, period, delta))
    return adjustment


def _counter_for(adjustment: QuotaAdjustment, delta: int) -> QuotaCounter:
    """The adjusted counter, locked; refuses 0 and a result below 0."""
    if delta == 0:
        raise ValidationError({"amount": "Enter a change other than 0."})
    counter, _ = QuotaCounter.objects.select_for_update().get_or_create(
        account=adjustment.account, period=adjustment.period, metric=adjustment.metric
    )
    if counter.used + delta < 0:
        unit = QUOTA_UNITS[adjustment.metric][0]
        used = operator_units(adjustment.metric, counter.used)
        raise ValidationError({"amount": f"Only {used:,} {unit} are counted."})
    return counter


def _move_mirror(account_id: int, metric: str, period: str, delta: int) -> None:
    try:
        get_limiter().adjust_quota(
            account_id=account_id, metric=metric, period=period, delta=delta
        )
    except LimitsUnavailable:
        # Reconciliation sets the mirror from the counter once the account is idle (Q11).
        logger.warning("quota mirror of account %s not adjusted", account_id)
