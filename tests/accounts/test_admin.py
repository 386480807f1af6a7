"""Admin (accounts AD1–AD7, K4): key shown once, revoke through the service, read-only usage."""

from __future__ import annotations

import re

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from accounts.keys import hash_key
from accounts.models.api_keys import ApiKey
from accounts.models.audit import AuditLog

from .conftest import dump_database

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.accounts.urls")]

KEY_RE = re.compile(r"vk_test_[0-9A-Za-z]{38}")


@pytest.fixture
def staff(admin_client):
    return admin_client


def test_ad3_add_shows_raw_key_once_without_messages(staff, account, rf) -> None:
    response = staff.post(
        reverse("admin:accounts_apikey_add"),
        {
            "account": account.pk,
            "name": "web",
            "allowed_origins": '["https://a.example"]',
        },
    )
    assert response.status_code == 200
    assert "accounts/admin/key_created.html" in [t.name for t in response.templates]
    assert "no-store" in response["Cache-Control"]
    html = response.content.decode()
    (raw,) = KEY_RE.findall(html)
    assert html.count(raw) == 1
    api_key = ApiKey.objects.get(key_hash=hash_key(raw))
    assert (api_key.name, api_key.allowed_origins) == ("web", ["https://a.example"])
    assert api_key.display in html
    assert list(get_messages(response.wsgi_request)) == []
    assert raw not in str(response.cookies)
    assert raw not in dump_database()
    assert AuditLog.objects.get(action="key.created").actor_label == "admin"
    # The key is not shown again.
    change = staff.get(reverse("admin:accounts_apikey_change", args=[api_key.pk]))
    assert change.status_code == 200 and raw not in change.content.decode()
    assert hash_key(raw) not in change.content.decode()


def test_m3_add_form_validates_limits(staff, account, plan) -> None:
    response = staff.post(
        reverse("admin:accounts_apikey_add"),
        {
            "account": account.pk,
            "name": "web",
            "rpm_limit": plan.requests_per_minute + 1,
        },
    )
    assert response.status_code == 200
    assert "allowed_origins" in response.context["adminform"].form.fields
    assert response.context["adminform"].form.errors
    assert not ApiKey.objects.exists()


def test_ad4_changelist_shows_display_and_status(staff, make_key) -> None:
    api_key, raw = make_key()
    html = staff.get(reverse("admin:accounts_apikey_changelist")).content.decode()
    assert api_key.display in html and "active" in html
    assert raw not in html and hash_key(raw) not in html


@pytest.mark.parametrize(
    "query", ["?q=nothing", "?q=vk_test", "?status=revoked", "?status=active"]
)
def test_ad4_changelist_search_and_filters(staff, make_key, query) -> None:
    make_key()
    assert (
        staff.get(reverse("admin:accounts_apikey_changelist") + query).status_code
        == 200
    )


def test_ad4_search_by_exact_id(staff, make_key) -> None:
    api_key, _ = make_key(name="needle")
    make_key(name="other")
    url = reverse("admin:accounts_apikey_changelist") + f"?q={api_key.id}"
    html = staff.get(url).content.decode()
    assert "needle" in html and "other" not in html


def test_ad4_key_hash_lookup_is_rejected(staff, make_key) -> None:
    _, raw = make_key()
    url = (
        reverse("admin:accounts_apikey_changelist")
        + f"?key_hash__startswith={hash_key(raw)[:2]}"
    )
    assert staff.get(url).status_code == 400


def test_ad4_keys_cannot_be_deleted(staff, make_key) -> None:
    api_key, _ = make_key()
    response = staff.post(reverse("admin:accounts_apikey_delete", args=[api_key.pk]))
    assert response.status_code == 403
    assert ApiKey.objects.filter(pk=api_key.pk).exists()


def test_k8_admin_edit_goes_through_the_service(staff, make_key) -> None:
    api_key, _ = make_key(name="old")
    response = staff.post(
        reverse("admin:accounts_apikey_change", args=[api_key.pk]),
        {
            "name": "new",
            "allowed_origins": "[]",
            "expires_at_0": "",
            "expires_at_1": "",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    api_key.refresh_from_db()
    assert (api_key.name, api_key.version) == ("new", 2)
    assert AuditLog.objects.filter(action="key.updated").count() == 1


def test_ad5_revoke_action_confirms_then_revokes(staff, make_key) -> None:
    first, _ = make_key()
    second, _ = make_key()
    url = reverse("admin:accounts_apikey_changelist")
    data = {"action": "revoke_selected", "_selected_action": [first.pk, second.pk]}
    confirm = staff.post(url, data)
    assert confirm.status_code == 200
    assert "accounts/admin/reason_confirm.html" in [t.name for t in confirm.templates]
    assert not ApiKey.objects.filter(revoked_at__isnull=False).exists()
    done = staff.post(url, {**data, "confirm": "yes", "reason": "leaked"})
    assert done.status_code == 302
    assert set(ApiKey.objects.values_list("revoked_reason", "version")) == {
        ("leaked", 2)
    }
    again = staff.post(url, {**data, "confirm": "yes", "reason": "again"}, follow=True)
    text = (
        " ".join(str(m) for m in get_messages(again.wsgi_request))
        or again.content.decode()
    )
    assert "skipped" in text
    assert AuditLog.objects.filter(action="key.revoked").count() == 2


def test_ad4_revoked_key_is_read_only(staff, make_key) -> None:
    api_key, _ = make_key(name="old")
    staff.post(
        reverse("admin:accounts_apikey_changelist"),
        {
            "action": "revoke_selected",
            "_selected_action": [api_key.pk],
            "confirm": "yes",
            "reason": "r",
        },
    )
    url = reverse("admin:accounts_apikey_change", args=[api_key.pk])
    assert staff.get(url).status_code == 200
    response = staff.post(url, {"name": "new", "allowed_origins": "[]"})
    assert response.status_code == 403
    assert ApiKey.objects.get(pk=api_key.pk).name == "old"


@pytest.mark.parametrize(
    "name", ["usagerecord", "usagerollup", "quotacounter", "auditlog"]
)
def test_ad6_ad7_usage_admins_are_read_only(staff, make_key, name) -> None:
    make_key()
    assert staff.get(reverse(f"admin:accounts_{name}_changelist")).status_code == 200
    assert staff.get(reverse(f"admin:accounts_{name}_add")).status_code == 403


def test_ad2_account_admin_deactivate_action(staff, account, make_key) -> None:
    make_key()
    url = reverse("admin:accounts_account_changelist")
    assert staff.get(url).status_code == 200
    staff.post(url, {"action": "deactivate_selected", "_selected_action": [account.pk]})
    account.refresh_from_db()
    assert not account.is_active
    assert ApiKey.objects.get().version == 2
    assert AuditLog.objects.filter(action="account.changed").count() == 1


def test_ad2_plan_admin_edit_is_audited(staff, plan) -> None:
    url = reverse("admin:accounts_plan_change", args=[plan.pk])
    response = staff.post(
        url,
        {
            "name": plan.name,
            "requests_per_minute": 60,
            "max_concurrent_streams": plan.max_concurrent_streams,
            "monthly_tts_characters": "",
            "monthly_asr_seconds": "",
            "max_session_seconds": plan.max_session_seconds,
            "allowed_endpoints": ["tts", "asr"],
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = AuditLog.objects.get(action="plan.changed")
    assert entry.changes == {"requests_per_minute": [600, 60]}


def test_ad6_usage_records_filter_and_search(staff, make_key) -> None:
    """AD6: filters by status, endpoint, model, account and key; search by key prefix."""
    import uuid

    from django.utils import timezone

    from accounts.services.usage import NewRecord, UsageCounters, usage_open

    api_key, _ = make_key()
    record = NewRecord(
        id=uuid.uuid4(),
        stream_id=uuid.uuid4(),
        request_id="req-42",
        account_id=api_key.account_id,
        api_key_id=api_key.id,
        endpoint="tts",
        model="fake/tone",
        started_at=timezone.now(),
        instance="test:1",
    )
    usage_open(record=record, counters=UsageCounters(tts_chars_in=3))
    url = reverse("admin:accounts_usagerecord_changelist")
    for query in (
        {"status__exact": "started", "endpoint__exact": "tts"},
        {"api_key__id__exact": str(api_key.id)},
        {"account__id__exact": api_key.account_id},
        {"q": api_key.key_prefix},
        {"q": "req-42"},
    ):
        response = staff.get(url, query)
        assert response.status_code == 200
        assert "req-42" in response.content.decode() or str(record.id) in (
            response.content.decode()
        ), query
    assert staff.get(url, {"status__exact": "failed"}).context["cl"].result_count == 0
    change = reverse("admin:accounts_usagerecord_change", args=[record.id])
    assert staff.post(change, {"status": "completed"}).status_code == 403


def test_admin_links_a_key_to_its_records_and_an_account_to_its_dashboard(
    admin_client, make_key
) -> None:
    api_key, _ = make_key()
    page = admin_client.get(reverse("admin:accounts_apikey_change", args=[api_key.pk]))
    records = reverse("admin:accounts_usagerecord_changelist")
    assert f"{records}?api_key__id__exact={api_key.pk}" in page.content.decode()
    listing = admin_client.get(f"{records}?api_key__id__exact={api_key.pk}")
    assert listing.status_code == 200
    account = admin_client.get(
        reverse("admin:accounts_account_change", args=[api_key.account_id])
    )
    dashboard = reverse("dashboard:usage", args=[api_key.account.slug])
    assert dashboard in account.content.decode()


def test_ad6_counted_column_says_what_a_row_stands_for() -> None:
    """A record counts its characters or its audio; a folded refusal row, its requests."""
    from accounts.models.usage import UsageRecord
    from accounts.usage_admin import UsageRecordAdmin

    column = UsageRecordAdmin.units
    tts = UsageRecord(endpoint="tts", tts_chars_in=1234)
    asr = UsageRecord(endpoint="asr", asr_audio_in_ms=61_500)
    folded = UsageRecord(endpoint="tts", tts_chars_in=0, requests=37)
    assert column(None, tts) == "1,234 chars"  # type: ignore[arg-type]
    assert column(None, asr) == "61.5 s audio"  # type: ignore[arg-type]
    assert column(None, folded) == "37 refused"  # type: ignore[arg-type]
