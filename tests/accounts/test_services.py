"""Services (accounts K3, K6, K8, M4–M6, A7, T4): keys, accounts, plans, audit log."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import connection

from accounts.exceptions import KeyAlreadyRevoked
from accounts.keys import hash_key, parse_key
from accounts.models.accounts import Account
from accounts.models.api_keys import ApiKey
from accounts.models.audit import AuditLog
from accounts.models.choices import AuditAction
from accounts.models.plans import Plan
from accounts.services.accounts import (
    account_get_or_create,
    account_update,
    plan_get_or_create_default,
    plan_update,
)
from accounts.services.api_keys import api_key_revoke, api_key_update

from .conftest import dump_database

pytestmark = pytest.mark.django_db


def test_k3_only_hash_is_stored(make_key) -> None:
    api_key, raw = make_key(allowed_origins=["https://app.example.com"], rpm_limit=3)
    assert parse_key(raw) is not None and raw.startswith("vk_test_")
    stored = ApiKey.objects.get(pk=api_key.pk)
    assert stored.key_hash == hash_key(raw)
    assert (stored.key_prefix, stored.last4) == (raw[:14], raw[-4:])
    dump = dump_database()
    assert hash_key(raw) in dump  # the dump does see the key's row
    assert raw not in dump
    assert raw[14:-4] not in dump  # not even the secret middle


def test_m6_key_created_audit_has_no_secret(make_key, django_user_model) -> None:
    staff = django_user_model.objects.create_user("ops")
    api_key, raw = make_key(actor=staff, actor_label="ops", name="ci")
    entry = AuditLog.objects.get(action=AuditAction.KEY_CREATED)
    assert (entry.actor, entry.actor_label, entry.object_id) == (
        staff,
        "ops",
        str(api_key.id),
    )
    assert entry.account == api_key.account
    assert entry.changes["name"] == [None, "ci"]
    assert "key_hash" not in entry.changes
    assert raw not in repr(entry.changes) and hash_key(raw) not in repr(entry.changes)
    assert api_key.created_by == staff


def test_k6_revoke_sets_fields_bumps_version_and_audits(make_key) -> None:
    api_key, _ = make_key()
    staff = User.objects.create_user("ops")
    revoked = api_key_revoke(api_key=api_key, actor=staff, reason="leaked")
    assert revoked.revoked_at is not None
    assert (revoked.revoked_by, revoked.revoked_reason, revoked.version) == (
        staff,
        "leaked",
        2,
    )
    assert revoked.status == "revoked"
    entry = AuditLog.objects.get(action=AuditAction.KEY_REVOKED)
    assert (entry.actor_label, entry.reason, entry.changes["version"]) == (
        "ops",
        "leaked",
        [1, 2],
    )


def test_k6_revocation_is_irreversible(make_key) -> None:
    api_key, _ = make_key()
    first = api_key_revoke(api_key=api_key, actor=None, reason="one")
    with pytest.raises(KeyAlreadyRevoked):
        api_key_revoke(api_key=api_key, actor=None, reason="two")
    with pytest.raises(KeyAlreadyRevoked):
        api_key_update(
            api_key=api_key, actor=None, actor_label="t", fields={"name": "again"}
        )
    again = ApiKey.objects.get(pk=api_key.pk)
    assert (again.revoked_at, again.revoked_reason, again.version) == (
        first.revoked_at,
        "one",
        2,
    )
    assert AuditLog.objects.filter(action=AuditAction.KEY_REVOKED).count() == 1


def test_k6_revoke_reason_too_long(make_key) -> None:
    api_key, _ = make_key()
    with pytest.raises(ValidationError):
        api_key_revoke(api_key=api_key, actor=None, reason="x" * 201)
    assert ApiKey.objects.get(pk=api_key.pk).revoked_at is None


def test_k8_update_bumps_version_and_picks_the_action(make_key) -> None:
    api_key, _ = make_key()
    renamed = api_key_update(
        api_key=api_key, actor=None, actor_label="t", fields={"name": "b"}
    )
    assert (renamed.name, renamed.version) == ("b", 2)
    limited = api_key_update(
        api_key=api_key,
        actor=None,
        actor_label="t",
        fields={"name": "c", "rpm_limit": 7},
    )
    assert (limited.rpm_limit, limited.version) == (7, 3)
    actions = list(
        AuditLog.objects.filter(object_id=str(api_key.id))
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions == ["key.created", "key.updated", "key.limits_changed"]


def test_k8_update_without_change_writes_nothing(make_key) -> None:
    api_key, _ = make_key(name="same")
    result = api_key_update(
        api_key=api_key, actor=None, actor_label="t", fields={"name": "same"}
    )
    assert result.version == 1
    assert AuditLog.objects.filter(object_type="api_key").count() == 1


def test_m3_update_validates(make_key, plan) -> None:
    api_key, _ = make_key()
    with pytest.raises(ValidationError):
        api_key_update(
            api_key=api_key,
            actor=None,
            actor_label="t",
            fields={"concurrency_limit": plan.max_concurrent_streams + 1},
        )
    assert ApiKey.objects.get(pk=api_key.pk).version == 1


def test_default_plan_is_generous_and_created_once(settings) -> None:
    settings.DEFAULT_PLAN_NAME = "starter"
    plan = plan_get_or_create_default()
    assert plan_get_or_create_default() == plan
    assert plan.name == "starter"
    assert (plan.requests_per_minute, plan.max_concurrent_streams) == (600, 16)
    assert plan.monthly_tts_characters is None and plan.monthly_asr_seconds is None
    assert (plan.max_session_seconds, plan.allowed_endpoints) == (3600, ["tts", "asr"])
    plan.full_clean()


def test_account_get_or_create_matches_slug_then_name(plan) -> None:
    created = account_get_or_create(name="Acme Corp", plan=None)
    assert (created.slug, created.plan) == ("acme-corp", plan)
    assert account_get_or_create(name="acme-corp", plan=None) == created
    assert account_get_or_create(name="Acme Corp", plan=plan) == created
    other = account_get_or_create(name="Acme  Corp!", plan=None)
    assert other != created and other.slug == "acme-corp-2"
    assert Account.objects.count() == 2


def test_account_get_or_create_refuses_a_different_plan(plan) -> None:
    account_get_or_create(name="Acme", plan=None)
    small = Plan.objects.create(
        name="small",
        requests_per_minute=1,
        max_concurrent_streams=1,
        max_session_seconds=60,
    )
    with pytest.raises(ValidationError):
        account_get_or_create(name="Acme", plan=small)
    assert account_get_or_create(name="Beta", plan=small).plan == small


def test_account_name_needs_a_slug(plan) -> None:
    with pytest.raises(ValidationError):
        account_get_or_create(name="!!!", plan=None)


def test_a7_deactivating_an_account_bumps_its_keys(make_key, account) -> None:
    first, _ = make_key()
    second, _ = make_key()
    account_update(
        account=account, actor=None, actor_label="t", fields={"is_active": False}
    )
    versions = set(ApiKey.objects.values_list("version", flat=True))
    assert versions == {2}
    entry = AuditLog.objects.get(action=AuditAction.ACCOUNT_CHANGED)
    assert entry.changes == {"is_active": [True, False]}


def test_plan_update_audits(plan) -> None:
    plan_update(
        plan=plan, actor=None, actor_label="t", fields={"requests_per_minute": 60}
    )
    entry = AuditLog.objects.get(action=AuditAction.PLAN_CHANGED)
    assert entry.changes == {"requests_per_minute": [600, 60]}
    assert Plan.objects.get(pk=plan.pk).requests_per_minute == 60


def test_s1_dump_covers_every_table() -> None:
    with connection.cursor() as cursor:
        tables = connection.introspection.table_names(cursor)
    assert {"accounts_apikey", "accounts_auditlog", "django_session"} <= set(tables)
