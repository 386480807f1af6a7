"""The audit trail (issue 32, accounts AD8, M6): every change an operator makes in the admin,
or a member on the dashboard, leaves exactly one AuditLog entry naming the right object,
with its actor, before/after values and reason; the log itself is read-only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from accounts.models.accounts import Account
from accounts.models.alerts import QuotaAlertSettings
from accounts.models.api_keys import ApiKey
from accounts.models.audit import AuditLog
from accounts.models.plans import Plan
from accounts.models.quota import QuotaOverride
from accounts.services.quota import period_of
from accounts.services.quota_overrides import quota_override_create

pytestmark = pytest.mark.django_db

INLINE = {"api_keys-TOTAL_FORMS": "0", "api_keys-INITIAL_FORMS": "0"}


@dataclass
class World:
    """What the actions act on, and the clients they act through."""

    staff: Any
    member: Any
    member_user: Any
    account: Account
    plan: Plan
    key: ApiKey


@pytest.fixture
def world(admin_client, client, django_user_model, account, plan, make_key) -> World:
    member = django_user_model.objects.create_user("mia", "mia@example.com", "pw")
    account.members.add(member)
    client.force_login(member)
    api_key, _ = make_key(name="web")
    return World(admin_client, client, member, account, plan, api_key)


def plan_data(plan: Plan, **changes: Any) -> dict[str, Any]:
    data = {
        "name": plan.name,
        "requests_per_minute": plan.requests_per_minute,
        "max_concurrent_streams": plan.max_concurrent_streams,
        "monthly_tts_characters": "",
        "monthly_asr_seconds": "",
        "max_session_seconds": plan.max_session_seconds,
        "allowed_endpoints": ["tts", "asr"],
    }
    return {**data, **changes}


def account_data(w: World, **changes: Any) -> dict[str, Any]:
    data = {
        "name": w.account.name,
        "slug": w.account.slug,
        "plan": w.plan.pk,
        "is_active": "on",
        "members": [w.member_user.pk],
        **INLINE,
    }
    return {**data, **changes}


def key_data(key: ApiKey, **changes: Any) -> dict[str, Any]:
    data = {
        "name": key.name,
        "allowed_origins": "[]",
        "expires_at_0": "",
        "expires_at_1": "",
        "rpm_limit": "",
        "concurrency_limit": "",
    }
    return {**data, **changes}


def posted(response: Any) -> Any:
    """A successful admin save redirects; anything else shows the form's errors."""
    assert response.status_code in (200, 302), response.status_code
    if (
        response.status_code == 200
        and response.context
        and "adminform" in response.context
    ):
        errors = response.context["adminform"].form.errors
        assert not errors, errors
    return response


def admin_url(name: str, *args: Any) -> str:
    return reverse(f"admin:accounts_{name}", args=args)


# Each case: (action, object_type, how to do it, the object's id, a part of its name).
Case = tuple[str, str, Callable[[World], Any], Callable[[World], str], str]


def create_plan(w: World) -> None:
    data = plan_data(w.plan, name="Pro", requests_per_minute=60)
    data["allowed_endpoints"] = ["tts"]
    posted(w.staff.post(admin_url("plan_add"), data))


def create_account(w: World) -> None:
    data = account_data(w, name="Globex", slug="globex")
    posted(w.staff.post(admin_url("account_add"), data))


def create_override(w: World) -> None:
    data = {
        "account": w.account.pk,
        "metric": "tts_characters",
        "kind": "top_up",
        "amount": 5000,
        "duration": "period",
        "reason": "launch week",
    }
    posted(w.staff.post(admin_url("quotaoverride_add"), data))


def end_override(w: World) -> None:
    override = _override(w)
    data = {
        "action": "end_selected",
        "_selected_action": [override.pk],
        "confirm": "yes",
        "reason": "launch over",
    }
    posted(w.staff.post(admin_url("quotaoverride_changelist"), data))


def _override(w: World) -> QuotaOverride:
    found = QuotaOverride.objects.filter(account=w.account).first()
    if found is None:
        found = quota_override_create(
            account=w.account,
            metric="tts_characters",
            kind="limit",
            amount=10,
            ends_at=None,
            reason="setup",
            actor=None,
            actor_label="setup",
        )
    return found


def adjust_counter(w: World) -> None:
    data = {
        "account": w.account.pk,
        "metric": "tts_characters",
        "period": period_of(timezone.now()),
        "amount": 120,
        "reason": "missed usage",
    }
    posted(w.staff.post(admin_url("quotaadjustment_add"), data))


def revoke_key(w: World) -> None:
    data = {
        "action": "revoke_selected",
        "_selected_action": [w.key.pk],
        "confirm": "yes",
        "reason": "leaked in a log",
    }
    posted(w.staff.post(admin_url("apikey_changelist"), data))


def admin_alerts(w: World) -> None:
    data = {
        "account": w.account.pk,
        "thresholds": "[50, 90]",
        "emails": '["ops@example.com"]',
        "email_enabled": "on",
        "webhook_url": "",
    }
    posted(w.staff.post(admin_url("quotaalertsettings_add"), data))


def dashboard_alerts(w: World) -> None:
    data = {
        "thresholds_text": "70, 100",
        "emails_text": "",
        "email_enabled": "on",
        "webhook_url": "https://hooks.example.com/veena",
    }
    url = reverse("dashboard:alerts", args=[w.account.slug])
    assert w.member.post(url, data).status_code == 200  # shows the new secret


def dashboard_key(w: World) -> None:
    url = reverse("dashboard:keys", args=[w.account.slug])
    assert w.member.post(url, {"name": "batch"}).status_code == 200


def _settings_id(w: World) -> str:
    return str(QuotaAlertSettings.objects.get(account=w.account).pk)


CASES: dict[str, Case] = {
    "plan created": (
        "plan.created",
        "plan",
        create_plan,
        lambda w: str(Plan.objects.get(name="Pro").pk),
        "Pro",
    ),
    "plan changed": (
        "plan.changed",
        "plan",
        lambda w: posted(
            w.staff.post(
                admin_url("plan_change", w.plan.pk),
                plan_data(w.plan, requests_per_minute=42),
            )
        ),
        lambda w: str(w.plan.pk),
        "default",
    ),
    "account created": (
        "account.created",
        "account",
        create_account,
        lambda w: str(Account.objects.get(slug="globex").pk),
        "Globex",
    ),
    "account changed": (
        "account.changed",
        "account",
        lambda w: posted(
            w.staff.post(
                admin_url("account_change", w.account.pk),
                account_data(w, name="Acme Corp"),
            )
        ),
        lambda w: str(w.account.pk),
        "Acme Corp",
    ),
    "member removed": (
        "account.members_changed",
        "account",
        lambda w: posted(
            w.staff.post(
                admin_url("account_change", w.account.pk), account_data(w, members=[])
            )
        ),
        lambda w: str(w.account.pk),
        "Acme",
    ),
    "account deactivated": (
        "account.changed",
        "account",
        lambda w: w.staff.post(
            admin_url("account_changelist"),
            {"action": "deactivate_selected", "_selected_action": [w.account.pk]},
        ),
        lambda w: str(w.account.pk),
        "Acme",
    ),
    "key created": (
        "key.created",
        "api_key",
        lambda w: w.staff.post(
            admin_url("apikey_add"),
            {"account": w.account.pk, "name": "ci", "allowed_origins": "[]"},
        ),
        lambda w: str(ApiKey.objects.get(name="ci").pk),
        "(ci)",
    ),
    "key renamed": (
        "key.updated",
        "api_key",
        lambda w: posted(
            w.staff.post(
                admin_url("apikey_change", w.key.pk), key_data(w.key, name="www")
            )
        ),
        lambda w: str(w.key.pk),
        "(www)",
    ),
    "key limits": (
        "key.limits_changed",
        "api_key",
        lambda w: posted(
            w.staff.post(
                admin_url("apikey_change", w.key.pk), key_data(w.key, rpm_limit=5)
            )
        ),
        lambda w: str(w.key.pk),
        "(web)",
    ),
    "key revoked": (
        "key.revoked",
        "api_key",
        revoke_key,
        lambda w: str(w.key.pk),
        "(web)",
    ),
    "member's key": (
        "key.created",
        "api_key",
        dashboard_key,
        lambda w: str(ApiKey.objects.get(name="batch").pk),
        "(batch)",
    ),
    "top-up": (
        "quota.override_created",
        "quota_override",
        create_override,
        lambda w: str(QuotaOverride.objects.get(reason="launch week").pk),
        "TTS characters +5,000 until",
    ),
    "override ended": (
        "quota.override_ended",
        "quota_override",
        end_override,
        lambda w: str(_override(w).pk),
        "TTS characters =10",
    ),
    "counter adjusted": (
        "quota.adjusted",
        "quota_counter",
        adjust_counter,
        lambda w: str(w.account.pk and _counter_id(w)),
        "Acme",
    ),
    "alerts by staff": (
        "alerts.changed",
        "quota_alert_settings",
        admin_alerts,
        _settings_id,
        "alerts of Acme",
    ),
    "alerts by member": (
        "alerts.changed",
        "quota_alert_settings",
        dashboard_alerts,
        _settings_id,
        "alerts of Acme",
    ),
    "secret rotated": (
        "webhook.secret_rotated",
        "quota_alert_settings",
        lambda w: w.member.post(
            reverse("dashboard:alerts_rotate_secret", args=[w.account.slug])
        ),
        _settings_id,
        "webhook of Acme",
    ),
}


def _counter_id(w: World) -> str:
    from accounts.models.quota import QuotaCounter

    return str(QuotaCounter.objects.get(account=w.account).pk)


@pytest.mark.parametrize("case", list(CASES))
def test_each_change_leaves_exactly_one_entry_naming_its_object(world, case) -> None:
    action, object_type, do, object_id, name = CASES[case]
    if case == "override ended":
        _override(world)
    before = set(AuditLog.objects.values_list("pk", flat=True))
    do(world)
    new = list(AuditLog.objects.exclude(pk__in=before))
    assert [(e.action, e.object_type) for e in new] == [(action, object_type)]
    (entry,) = new
    assert entry.object_id == object_id(world)
    assert name in entry.object_name, entry.object_name
    assert entry.changes, "an entry says what changed"
    by_member = case in ("member's key", "alerts by member", "secret rotated")
    assert entry.actor_label == ("mia" if by_member else "admin")
    assert entry.actor is not None


def test_reasons_and_before_after_values_are_kept(world) -> None:
    revoke_key(world)
    posted(
        world.staff.post(
            admin_url("account_change", world.account.pk),
            account_data(world, members=[]),
        )
    )
    revoked = AuditLog.objects.get(action="key.revoked")
    assert revoked.reason == "leaked in a log"
    members = AuditLog.objects.get(action="account.members_changed")
    assert members.changes == {"members": [["mia"], []]}


def test_the_audit_list_shows_key_names_prefixes_and_reasons(world) -> None:
    revoke_key(world)
    html = world.staff.get(admin_url("auditlog_changelist")).content.decode()
    assert world.key.display in html and "(web)" in html
    assert "leaked in a log" in html
    entry = AuditLog.objects.get(action="key.revoked")
    detail = world.staff.get(admin_url("auditlog_change", entry.pk)).content.decode()
    assert "revoked_at" in detail and "leaked in a log" in detail


def test_the_audit_log_cannot_be_edited_or_deleted(world) -> None:
    entry = AuditLog.objects.first()
    assert world.staff.get(admin_url("auditlog_add")).status_code == 403
    change = world.staff.post(admin_url("auditlog_change", entry.pk), {"reason": "x"})
    assert change.status_code == 403
    delete = world.staff.post(admin_url("auditlog_delete", entry.pk), {"post": "yes"})
    assert delete.status_code == 403
    listing = world.staff.get(admin_url("auditlog_changelist"))
    assert "delete_selected" not in listing.content.decode()
    for name in ("plan", "account"):
        obj = world.plan if name == "plan" else world.account
        assert world.staff.post(admin_url(f"{name}_delete", obj.pk)).status_code == 403
    assert AuditLog.objects.filter(pk=entry.pk, reason=entry.reason).exists()
