"""API key writes (accounts K3–K8). Only this module writes key_hash, key_prefix and last4 (M5)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from accounts.exceptions import KeyAlreadyRevoked, LimitsUnavailable
from accounts.keys import display_parts, generate_key, hash_key
from accounts.limits import get_limiter
from accounts.models.accounts import Account
from accounts.models.api_keys import REVOKED_REASON_MAX_LENGTH, ApiKey
from accounts.models.choices import AuditAction, KeyKind
from accounts.services.audit import actor_label_for, apply_changes, audit_log_write
from accounts.services.plans import plan_get_or_create_default

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

# Fields a key's owner may change after creation (K8); the first two are its limits.
LIMIT_FIELDS = ("rpm_limit", "concurrency_limit")
EDITABLE_FIELDS = ("name", "expires_at", "allowed_origins", *LIMIT_FIELDS)
# K9: at most one last_used_at write per key and minute.
LAST_USED_RESOLUTION = timedelta(seconds=60)
ANONYMOUS_SLUG = "anonymous"


def publish_key_versions(versions: Iterable[tuple[uuid.UUID, int]]) -> None:
    """On commit, write each key's new version to the limits store (A5, A6, K6).

    A store that is down then misses the write; every process reloads the key within
    ``API_KEY_CACHE_SECONDS`` and raises the stored version itself.
    """
    pending = list(versions)

    def write() -> None:
        limiter = get_limiter()
        for key_id, version in pending:
            try:
                limiter.set_key_version(key_id, version)
            except LimitsUnavailable:
                logger.warning("api key %s: version %d not published", key_id, version)

    if pending:
        transaction.on_commit(write)


def account_key_versions_bump(account: Account) -> None:
    """Bump the version of every key of ``account`` and publish it on commit, so every
    process reloads their principals (A6, A7): call inside the changing transaction."""
    keys = ApiKey.objects.filter(account=account)
    keys.update(version=F("version") + 1)
    publish_key_versions(keys.values_list("id", "version"))


def api_key_create(
    *,
    account: Account,
    name: str,
    actor: User | None,
    actor_label: str,
    expires_at: datetime | None = None,
    allowed_origins: Sequence[str] = (),
    rpm_limit: int | None = None,
    concurrency_limit: int | None = None,
    kind: str = KeyKind.STANDARD,
) -> tuple[ApiKey, str]:
    """Create a key and return it with the raw key, which is never stored (K3, K4)."""
    raw = generate_key(settings.API_KEY_PREFIX)
    key_prefix, last4 = display_parts(raw)
    api_key = ApiKey(
        account=account,
        name=name,
        key_prefix=key_prefix,
        last4=last4,
        key_hash=hash_key(raw),
        created_by=actor,
        expires_at=expires_at,
        allowed_origins=list(allowed_origins),
        rpm_limit=rpm_limit,
        concurrency_limit=concurrency_limit,
        kind=kind,
    )
    api_key.full_clean(validate_unique=False)
    with transaction.atomic():
        api_key.save(force_insert=True)
        audit_log_write(
            actor=actor,
            actor_label=actor_label,
            action=AuditAction.KEY_CREATED,
            account=account,
            object_type="api_key",
            object_id=str(api_key.id),
            object_name=str(api_key),
            changes={f: (None, getattr(api_key, f)) for f in EDITABLE_FIELDS},
        )
    logger.info(
        "api key %s (%s) created for account %s",
        api_key.id,
        api_key.display,
        account.pk,
    )
    return api_key, raw


def api_key_revoke(
    *, api_key: ApiKey, actor: User | None, reason: str, actor_label: str | None = None
) -> ApiKey:
    """Revoke a key for good and bump its version, or raise KeyAlreadyRevoked (K6)."""
    if len(reason) > REVOKED_REASON_MAX_LENGTH:
        raise ValidationError({"revoked_reason": "The reason is too long."})
    with transaction.atomic():
        locked = ApiKey.objects.select_for_update().get(pk=api_key.pk)
        if locked.revoked_at is not None:
            raise KeyAlreadyRevoked(f"API key {locked.id} is already revoked")
        before_version = locked.version
        locked.revoked_at = timezone.now()
        locked.revoked_by = actor
        locked.revoked_reason = reason
        locked.version = F("version") + 1
        locked.save(
            update_fields=["revoked_at", "revoked_by", "revoked_reason", "version"]
        )
        locked.refresh_from_db(fields=["version"])
        publish_key_versions([(locked.id, locked.version)])
        audit_log_write(
            actor=actor,
            actor_label=actor_label or actor_label_for(actor, default="system"),
            action=AuditAction.KEY_REVOKED,
            account=locked.account,
            object_type="api_key",
            object_id=str(locked.id),
            object_name=str(locked),
            changes={
                "revoked_at": (None, locked.revoked_at),
                "version": (before_version, locked.version),
            },
            reason=reason,
        )
    logger.info("api key %s (%s) revoked", locked.id, locked.display)
    return locked


def api_key_update(
    *,
    api_key: ApiKey,
    actor: User | None,
    actor_label: str,
    fields: Mapping[str, object],
) -> ApiKey:
    """Change editable fields, bump the version and audit the change once (K8)."""
    unknown = set(fields) - set(EDITABLE_FIELDS)
    assert not unknown, f"not editable: {sorted(unknown)}"
    with transaction.atomic():
        locked_key = ApiKey.objects.select_for_update().get(pk=api_key.pk)
        if locked_key.revoked_at is not None:
            raise KeyAlreadyRevoked(f"API key {locked_key.id} is revoked and read-only")
        changes = apply_changes(locked_key, fields)
        if not changes:
            return locked_key
        before_version = locked_key.version
        locked_key.version = F("version") + 1
        locked_key.save(update_fields=[*changes, "version"])
        locked_key.refresh_from_db(fields=["version"])
        publish_key_versions([(locked_key.id, locked_key.version)])
        limits_changed = any(name in LIMIT_FIELDS for name in changes)
        audit_log_write(
            actor=actor,
            actor_label=actor_label,
            action=AuditAction.KEY_LIMITS_CHANGED
            if limits_changed
            else AuditAction.KEY_UPDATED,
            account=locked_key.account,
            object_type="api_key",
            object_id=str(locked_key.id),
            object_name=str(locked_key),
            changes={**changes, "version": (before_version, locked_key.version)},
        )
    return locked_key


def api_key_versions_sync(*, key_ids: Sequence[uuid.UUID], batch: int = 500) -> int:
    """Raise the store's version of each key to the database's; return how many rose.

    The embedded default's store lives in the gateway's memory, so a key changed by another
    process (``manage.py revoke_api_key``) reaches it only through the database: the
    scheduler calls this every ``KEY_VERSION_SYNC_S`` for the keys the store knows (A5).
    """
    limiter = get_limiter()
    raised = 0
    for start in range(0, len(key_ids), batch):
        chunk = key_ids[start : start + batch]
        rows = ApiKey.objects.filter(pk__in=chunk).values_list("id", "version")
        for key_id, version in rows:
            if limiter.key_version(key_id) != version:
                raised += limiter.set_key_version(key_id, version) == version
    return raised


def api_key_touch(*, key_id: uuid.UUID, now: datetime) -> bool:
    """Record a use with one conditional UPDATE, at most once a minute per key (K9)."""
    stale = Q(last_used_at__isnull=True) | Q(
        last_used_at__lt=now - LAST_USED_RESOLUTION
    )
    return bool(ApiKey.objects.filter(stale, pk=key_id).update(last_used_at=now))


def api_key_live_or_create(
    *, account: Account, kind: str, name: str, actor: User | None, actor_label: str
) -> ApiKey:
    """The account's oldest live key of ``kind``, or a new one whose raw key is thrown
    away: a key that only the gateway itself uses (one creator per account at a time)."""

    def live() -> ApiKey | None:
        return (
            ApiKey.objects.filter(account=account, kind=kind, revoked_at__isnull=True)
            .order_by("created_at")
            .first()
        )

    existing = live()
    if existing is not None:
        return existing
    with transaction.atomic():
        # A row lock on PostgreSQL; SQLite serialises the writers anyway.
        Account.objects.select_for_update().get(pk=account.pk)
        existing = live()
        if existing is not None:
            return existing
        api_key, _raw = api_key_create(
            account=account, name=name, actor=actor, actor_label=actor_label, kind=kind
        )
    return api_key


def anonymous_api_key() -> ApiKey:
    """The built-in ``anonymous`` key that unauthenticated usage is metered to (tts W7).

    Created on first use on the default plan, from a random key that is thrown away.
    """
    existing = (
        ApiKey.objects.filter(account__slug=ANONYMOUS_SLUG, revoked_at__isnull=True)
        .order_by("created_at")
        .first()
    )
    if existing is not None:
        return existing
    account, _ = Account.objects.get_or_create(
        slug=ANONYMOUS_SLUG,
        defaults={"name": ANONYMOUS_SLUG, "plan": plan_get_or_create_default()},
    )
    return api_key_live_or_create(
        account=account,
        kind=KeyKind.STANDARD,
        name=ANONYMOUS_SLUG,
        actor=None,
        actor_label="accounts.metering",
    )
