"""AuditLog writes (accounts M6): append-only, never a key or a hash."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import TYPE_CHECKING
from uuid import UUID

from django.db import models

from accounts.models.accounts import Account
from accounts.models.audit import AuditLog
from accounts.models.choices import AuditAction

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# Secrets never enter the audit log; a webhook secret appears only as its hint.
FORBIDDEN_FIELDS = frozenset({"key_hash", "webhook_secret", "previous_webhook_secret"})


def jsonable(value: object) -> object:
    """A JSON-safe form of a field value: ISO datetimes, primary keys for models."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, models.Model):
        return jsonable(value.pk)
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    return value


def audit_log_write(
    *,
    actor: User | None,
    actor_label: str,
    action: AuditAction,
    account: Account | None,
    object_type: str,
    object_id: str,
    object_name: str,
    changes: Mapping[str, tuple[object, object]],
    reason: str = "",
) -> AuditLog:
    """Append one AuditLog row; ``changes`` maps a field to ``(before, after)``, and
    ``object_name`` is what people call the object (a key's display form and name)."""
    assert not FORBIDDEN_FIELDS & changes.keys(), "secrets never enter the audit log"
    return AuditLog.objects.create(
        actor=actor,
        actor_label=actor_label,
        action=action,
        account=account,
        object_type=object_type,
        object_id=object_id,
        object_name=object_name[:200],
        changes={
            name: [jsonable(before), jsonable(after)]
            for name, (before, after) in changes.items()
        },
        reason=reason,
    )


def actor_label_for(actor: User | None, *, default: str) -> str:
    """The username of ``actor``, or ``default`` when there is no user."""
    return actor.get_username() if actor is not None else default


def apply_changes(
    instance: models.Model,
    fields: Mapping[str, object],
    *,
    validate_unique: bool = False,
) -> dict[str, tuple[object, object]]:
    """Set and validate ``fields`` on ``instance``; return ``{name: (before, after)}``."""
    before = {name: getattr(instance, name) for name in fields}
    for name, value in fields.items():
        setattr(instance, name, value)
    instance.full_clean(validate_unique=validate_unique)
    return {
        name: (old, getattr(instance, name))
        for name, old in before.items()
        if old != getattr(instance, name)
    }
