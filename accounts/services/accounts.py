"""Account, membership and plan writes, each audited once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.text import slugify

from accounts.models.accounts import Account
from accounts.models.choices import AuditAction
from accounts.models.plans import Plan
from accounts.services.api_keys import account_key_versions_bump
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


R = TypeVar("R", Plan, Account)


def _only(fields: Mapping[str, object], allowed: Sequence[str]) -> None:
    """Writes name only the fields they may set."""
    assert set(fields) <= set(allowed), sorted(set(fields) - set(allowed))


def _new(model: type[R], fields: Mapping[str, object], allowed: Sequence[str]) -> R:
    """An unsaved ``model`` of ``fields`` (each one of ``allowed``), validated."""
    _only(fields, allowed)
    record = model(**fields)
    record.full_clean()
    return record


def _saved_changes(
    record: R, fields: Mapping[str, object], allowed: Sequence[str]
) -> tuple[R, dict[str, tuple[object, object]]]:
    """In a transaction: ``record`` locked, ``fields`` (each one of ``allowed``) applied
    and saved; the locked record and its changes."""
    _only(fields, allowed)
    locked = type(record).objects.select_for_update().get(pk=record.pk)
    changes = apply_changes(locked, fields, validate_unique=True)
    if changes:
        locked.save(update_fields=list(changes))
    return locked, changes


def _created(
    record: Plan | Account, fields: Iterable[str]
) -> dict[str, tuple[object, object]]:
    """The audit changes of a new record: every value, from nothing."""
    return {name: (None, getattr(record, name)) for name in fields}


def _audit(
    record: Plan | Account,
    action: AuditAction,
    actor: User | None,
    actor_label: str,
    changes: Mapping[str, tuple[object, object]],
) -> None:
    """Write the one audit entry of a plan or account write."""
    account = record if isinstance(record, Account) else None
    audit_log_write(
        actor=actor,
        actor_label=actor_label,
        action=action,
        account=account,
        object_type="plan" if account is None else "account",
        object_id=str(record.pk),
        object_name=record.name,
        changes=changes,
    )


def _unique_slug(name: str) -> str:
    base = slugify(name)[:190]
    if not base:
        raise ValidationError({"name": "The account name needs letters or digits."})
    slug, n = base, 2
    while Account.objects.filter(slug=slug).exists():
        slug, n = f"{base}-{n}", n + 1
    return slug


def account_get_or_create(
    *, name: str, plan: Plan | None, actor_label: str = "system"
) -> Account:
    """The account whose slug, else whose name, is ``name``; created on ``plan`` if none
    (and audited as ``actor_label``).

    A ``plan`` that differs from an existing account's plan is a ValidationError.
    """
    account = (
        Account.objects.filter(slug=name).first()
        or Account.objects.filter(name=name).order_by("pk").first()
    )
    if account is None:
        fields = {
            "name": name,
            "slug": _unique_slug(name),
            "plan": plan or plan_get_or_create_default(),
        }
        return account_create(actor=None, actor_label=actor_label, fields=fields)
    if plan is not None and account.plan_id != plan.pk:
        raise ValidationError({"plan": "The account exists on a different plan."})
    return account


def plan_create(
    *, actor: User | None, actor_label: str, fields: Mapping[str, object]
) -> Plan:
    """Create a plan and write ``plan.created`` with every value."""
    plan = _new(Plan, fields, PLAN_FIELDS)
    with transaction.atomic():
        plan.save(force_insert=True)
        _audit(
            plan, AuditAction.PLAN_CREATED, actor, actor_label, _created(plan, fields)
        )
    return plan


def plan_update(
    *, plan: Plan, actor: User | None, actor_label: str, fields: Mapping[str, object]
) -> Plan:
    """Change plan values and write ``plan.changed`` (AD2)."""
    with transaction.atomic():
        locked, changes = _saved_changes(plan, fields, PLAN_FIELDS)
        if changes:
            _audit(locked, AuditAction.PLAN_CHANGED, actor, actor_label, changes)
    return locked


def _usernames(users: Iterable[User]) -> list[str]:
    return sorted(user.get_username() for user in users)


def account_create(
    *,
    actor: User | None,
    actor_label: str,
    fields: Mapping[str, object],
    members: Sequence[User] = (),
) -> Account:
    """Create an account with its members and write ``account.created``."""
    account = _new(Account, fields, ACCOUNT_FIELDS)
    with transaction.atomic():
        account.save(force_insert=True)
        account.members.set(members)
        changes = _created(account, fields)
        changes["members"] = ([], _usernames(members))
        _audit(account, AuditAction.ACCOUNT_CREATED, actor, actor_label, changes)
    return account


def account_update(
    *,
    account: Account,
    actor: User | None,
    actor_label: str,
    fields: Mapping[str, object],
    members: Sequence[User] | None = None,
) -> Account:
    """Change an account and, given ``members``, its membership; a new plan or active flag
    bumps every key's version (A7). One entry: ``account.members_changed`` when only the
    membership changed, else ``account.changed``."""
    with transaction.atomic():
        locked, changes = _saved_changes(account, fields, ACCOUNT_FIELDS)
        if members is not None:
            before = _usernames(locked.members.all())
            if before != _usernames(members):
                locked.members.set(members)
                changes["members"] = (before, _usernames(members))
        if not changes:
            return locked
        if any(name in ACCOUNT_KEY_FIELDS for name in changes):
            account_key_versions_bump(locked)
        only_members = set(changes) == {"members"}
        action = (
            AuditAction.MEMBERS_CHANGED if only_members else AuditAction.ACCOUNT_CHANGED
        )
        _audit(locked, action, actor, actor_label, changes)
    return locked
