"""Account and plan writes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils.text import slugify

from accounts.models.accounts import Account
from accounts.models.api_keys import ApiKey
from accounts.models.choices import AuditAction
from accounts.models.plans import Plan
from accounts.services.api_keys import publish_key_versions
from accounts.services.audit import apply_changes, audit_log_write
from accounts.services.plans import plan_get_or_create_default

if TYPE_CHECKING:
    from django.contrib.auth.models import User

PLAN_FIELDS = (
    "name",
    "requests_per_minute",
    "max_concurrent_streams",
    "monthly_tts_characters",
    "monthly_asr_seconds",
    "max_session_seconds",
    "allowed_endpoints",
)
ACCOUNT_FIELDS = ("name", "slug", "plan", "is_active")
# A change to one of these changes what every key of the account may do (A7).
ACCOUNT_KEY_FIELDS = ("plan", "is_active")


def _unique_slug(name: str) -> str:
    base = slugify(name)[:190]
    if not base:
        raise ValidationError({"name": "The account name needs letters or digits."})
    slug, n = base, 2
    while Account.objects.filter(slug=slug).exists():
        slug, n = f"{base}-{n}", n + 1
    return slug


def account_get_or_create(*, name: str, plan: Plan | None) -> Account:
    """The account whose slug, else whose name, is ``name``; created on ``plan`` if none.

    A ``plan`` that differs from an existing account's plan is a ValidationError.
    """
    account = (
        Account.objects.filter(slug=name).first()
        or Account.objects.filter(name=name).order_by("pk").first()
    )
    if account is None:
        with transaction.atomic():
            return Account.objects.create(
                name=name,
                slug=_unique_slug(name),
                plan=plan or plan_get_or_create_default(),
            )
    if plan is not None and account.plan_id != plan.pk:
        raise ValidationError({"plan": "The account exists on a different plan."})
    return account


def plan_update(
    *, plan: Plan, actor: User | None, actor_label: str, fields: Mapping[str, object]
) -> Plan:
    """Change plan values and write ``plan.changed`` (AD2)."""
    assert set(fields) <= set(PLAN_FIELDS), sorted(set(fields) - set(PLAN_FIELDS))
    with transaction.atomic():
        locked = Plan.objects.select_for_update().get(pk=plan.pk)
        changes = apply_changes(locked, fields, validate_unique=True)
        if changes:
            locked.save(update_fields=list(changes))
            audit_log_write(
                actor=actor,
                actor_label=actor_label,
                action=AuditAction.PLAN_CHANGED,
                account=None,
                object_type="plan",
                object_id=str(locked.pk),
                changes=changes,
            )
    return locked


def account_update(
    *,
    account: Account,
    actor: User | None,
    actor_label: str,
    fields: Mapping[str, object],
) -> Account:
    """Change an account; a new plan or active flag bumps every key's version (A7)."""
    assert set(fields) <= set(ACCOUNT_FIELDS), sorted(set(fields) - set(ACCOUNT_FIELDS))
    with transaction.atomic():
        locked = Account.objects.select_for_update().get(pk=account.pk)
        changes = apply_changes(locked, fields, validate_unique=True)
        if not changes:
            return locked
        locked.save(update_fields=list(changes))
        if any(name in ACCOUNT_KEY_FIELDS for name in changes):
            keys = ApiKey.objects.filter(account=locked)
            keys.update(version=F("version") + 1)
            publish_key_versions(keys.values_list("id", "version"))
        audit_log_write(
            actor=actor,
            actor_label=actor_label,
            action=AuditAction.ACCOUNT_CHANGED,
            account=locked,
            object_type="account",
            object_id=str(locked.pk),
            changes=changes,
        )
    return locked
