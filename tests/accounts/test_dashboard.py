"""The dashboard in the Django test client: sums, zones, CSV, access (accounts D1–D10, S9)."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models.audit import AuditLog
from accounts.models.rollups import UsageRollup
from tests.support.dashboard_seed import FIRST, LAST, PASSWORD, seed

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded():
    return seed(now=timezone.now())


def login(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def chart(response) -> dict:
    import json

    match = re.search(
        r'<script id="usage-data" type="application/json">(.*?)</script>',
        response.content.decode(),
        re.S,
    )
    assert match, "no chart data on the page"
    return json.loads(match.group(1))


def card(response, metric: str) -> str:
    match = re.search(
        rf'data-metric="{metric}" data-value="([^"]*)"', response.content.decode()
    )
    assert match, metric
    return match.group(1)


def usage_url(slug: str, **query: str) -> str:
    params = {"from": FIRST, "to": LAST, **query}
    return (
        reverse("dashboard:usage", args=[slug])
        + "?"
        + "&".join(f"{k}={v}" for k, v in params.items())
    )


def test_d1_login_required_and_member_lands_on_their_account(seeded) -> None:
    anonymous = Client().get(reverse("dashboard:usage", args=["acme"]))
    assert anonymous.status_code == 302 and "/dashboard/login/" in anonymous["Location"]
    response = login(seeded.alice).get(reverse("dashboard:index"))
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:usage", args=["acme"])


def test_d4_utc_days_sum_the_seeded_records(seeded) -> None:
    response = login(seeded.alice).get(usage_url("acme", tz="UTC"))
    assert response.status_code == 200
    data = chart(response)
    assert data["labels"] == ["2026-03-07", "2026-03-08", "2026-03-09"]
    assert data["series"]["tts_chars_in"] == [0, 340, 300]
    assert data["series"]["requests"] == [0, 3, 3]
    assert data["errors"] == {"abandoned": [0, 0, 1], "inference_failed": [0, 1, 0]}
    assert card(response, "requests") == "6"
    assert card(response, "errors") == "2"
    assert card(response, "tts_audio_out_ms") == "12500"
    assert card(response, "asr_audio_in_ms") == "6500"
    assert "7777" not in response.content.decode()


def test_d4_new_york_days_are_built_from_utc_hours_across_dst(seeded) -> None:
    response = login(seeded.alice).get(usage_url("acme", tz="America/New_York"))
    data = chart(response)
    assert data["series"]["tts_chars_in"] == [100, 540, 0]
    assert data["series"]["requests"] == [1, 3, 2]
    assert card(response, "requests") == "6"  # the same records, other days


def test_d4_hour_buckets_show_empty_hours_as_zero(seeded) -> None:
    response = login(seeded.alice).get(
        usage_url(
            "acme",
            tz="America/New_York",
            granularity="hour",
            to="2026-03-08",
            **{"from": "2026-03-08"},
        )
    )
    data = chart(response)
    assert len(data["labels"]) == 23  # the spring-forward day
    assert (
        sum(data["series"]["requests"]) == 3
        and data["series"]["requests"].count(0) == 20
    )
    assert not any(data["partial"])


def test_d4_latency_percentiles_per_day_from_histograms(seeded) -> None:
    data = chart(login(seeded.alice).get(usage_url("acme", tz="UTC")))
    p50, p95 = data["latency"]["asr_p50"], data["latency"]["asr_p95"]
    assert p50[0] is None and p50[1] is None
    assert 200 <= p50[2] <= 500 and 500 <= p95[2] <= 700  # items of 300 and 700 ms
    assert data["latency"]["ttfb_p50"][1] is not None


def test_d4_breakdowns_by_key_and_route_model(seeded) -> None:
    html = login(seeded.alice).get(usage_url("acme", tz="UTC")).content.decode()
    prod, staging = seeded.keys["prod"], seeded.keys["staging"]
    assert f'data-key="{prod.id}"' in html and f'data-key="{staging.id}"' in html
    assert 'data-route="tts_rest" data-model="piper"' in html
    assert 'data-route="asr_realtime" data-model="whisper-tiny.en"' in html


def test_d4_quota_bar_and_forecast(seeded) -> None:
    html = login(seeded.alice).get(usage_url("acme")).content.decode()
    match = re.search(
        r'data-metric="tts_characters" data-used="(\d+)" data-limit="(\d+)" data-forecast="(\d+)"',
        html,
    )
    assert match
    used, limit, forecast = map(int, match.groups())
    assert (used, limit) == (8500, 10000) and forecast >= used


def test_d3_bad_filters_are_form_errors_not_500(seeded) -> None:
    client = login(seeded.alice)
    for query in (
        {"granularity": "hour", "from": "2026-01-01", "to": "2026-03-01"},
        {"from": "2024-01-01", "to": "2026-03-01"},
        {"tz": "Nowhere/Land"},
        {"from": "yesterday"},
        {"key": "not-a-uuid"},
    ):
        url = (
            reverse("dashboard:usage", args=["acme"])
            + "?"
            + "&".join(f"{k}={v}" for k, v in query.items())
        )
        assert client.get(url).status_code == 400, query


def test_d7_csv_matches_the_page_totals(seeded) -> None:
    client = login(seeded.alice)
    for tz in ("UTC", "America/New_York", "Asia/Kolkata", "Asia/Kathmandu"):
        page = client.get(usage_url("acme", tz=tz))
        response = client.get(usage_url("acme", tz=tz).replace("/usage/", "/usage.csv"))
        assert response["Content-Type"] == "text/csv; charset=utf-8"
        assert "attachment" in response["Content-Disposition"]
        rows = list(
            csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))
        )
        assert sum(int(r["requests"]) for r in rows) == int(card(page, "requests"))
        assert sum(int(r["errors"]) for r in rows) == int(card(page, "errors"))
        audio = sum(Decimal(r["tts_audio_seconds"]) for r in rows) * 1000
        assert audio == int(card(page, "tts_audio_out_ms"))
        per_bucket = {}
        for r in rows:
            per_bucket[r["bucket_start"]] = per_bucket.get(r["bucket_start"], 0) + int(
                r["tts_characters"]
            )
        assert list(per_bucket.values()) == chart(page)["series"]["tts_chars_in"], tz


def test_d7_csv_of_hours_matches_the_chart_bucket_by_bucket(seeded) -> None:
    client = login(seeded.alice)
    for tz in ("UTC", "Asia/Kolkata"):
        url = usage_url("acme", tz=tz, granularity="hour")
        page = client.get(url)
        response = client.get(url.replace("/usage/", "/usage.csv"))
        rows = list(
            csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))
        )
        per_bucket: dict[str, list[int]] = {}
        for r in rows:
            cell = per_bucket.setdefault(r["bucket_start"], [0, 0])
            cell[0] += int(r["requests"])
            cell[1] += int(r["tts_characters"])
        series = chart(page)["series"]
        assert [c[0] for c in per_bucket.values()] == series["requests"], tz
        assert [c[1] for c in per_bucket.values()] == series["tts_chars_in"], tz
        assert sum(series["requests"]) == int(card(page, "requests")) > 0


def test_d7_csv_cells_cannot_become_formulas(seeded) -> None:
    from accounts.selectors.export import safe_cell

    assert safe_cell("=HYPERLINK()") == "'=HYPERLINK()" and safe_cell("prod") == "prod"


def test_s9_member_cannot_reach_another_account_by_url_filter_csv_or_keys(
    seeded,
) -> None:
    client = login(seeded.alice)
    beta_key = seeded.keys["beta-key"]
    forbidden = [
        reverse("dashboard:usage", args=["beta"]),
        reverse("dashboard:usage_csv", args=["beta"]),
        reverse("dashboard:requests", args=["beta"]),
        reverse("dashboard:keys", args=["beta"]),
        reverse("dashboard:alerts", args=["beta"]),
        reverse("dashboard:usage", args=["no-such-account"]),
        reverse("dashboard:all"),
        usage_url("acme", key=str(beta_key.id)),
        usage_url("acme", key=str(beta_key.id)).replace("/usage/", "/usage.csv"),
        reverse("dashboard:requests", args=["acme"]) + f"?key={beta_key.id}",
        reverse("dashboard:key_edit", args=["acme", beta_key.id]),
        reverse("dashboard:key_revoke", args=["acme", beta_key.id]),
    ]
    for url in forbidden:
        response = client.get(url)
        assert response.status_code == 403, url
        assert (
            "7777" not in response.content.decode()
            and "Beta" not in response.content.decode()
        )
    revoke = client.post(
        reverse("dashboard:key_revoke", args=["acme", beta_key.id]),
        {"confirm": "on", "reason": "x"},
    )
    assert revoke.status_code == 403
    beta_key.refresh_from_db()
    assert beta_key.revoked_at is None


def test_d8_staff_see_every_account_and_a_missing_one_is_404(seeded) -> None:
    client = login(seeded.staff)
    response = client.get(reverse("dashboard:all") + f"?from={FIRST}&to={LAST}&tz=UTC")
    assert response.status_code == 200
    assert card(response, "requests") == "7"
    assert "Beta" in response.content.decode()
    assert client.get(usage_url("beta")).status_code == 200
    assert client.get(reverse("dashboard:usage", args=["nope"])).status_code == 404


def test_d8_recompute_button_rebuilds_rollups(seeded) -> None:
    client = login(seeded.staff)
    assert client.post(reverse("dashboard:recompute")).status_code == 302
    assert login(seeded.alice).post(reverse("dashboard:recompute")).status_code == 403


def test_d6_recent_requests_newest_first_filterable_and_paginated(seeded) -> None:
    client = login(seeded.alice)
    url = (
        reverse("dashboard:requests", args=["acme"]) + f"?from={FIRST}&to={LAST}&tz=UTC"
    )
    html = client.get(url).content.decode()
    assert html.count("data-record=") == 6
    assert html.index("abandoned") < html.index("inference_failed")
    failed = client.get(url + "&status=failed").content.decode()
    assert failed.count("data-record=") == 1
    from accounts.selectors import Scope
    from accounts.selectors.records import records_page, usage_records
    from tests.support.dashboard_seed import at

    records = usage_records(
        scope=Scope(account=seeded.a),
        since=at("2026-03-01T00:00"),
        until=at("2026-04-01T00:00"),
    )
    first = records_page(records, cursor=None, size=4)
    second = records_page(records, cursor=first.next_cursor, size=4)
    assert (
        len(first.records) == 4
        and len(second.records) == 2
        and second.next_cursor is None
    )
    assert {r.id for r in first.records}.isdisjoint(r.id for r in second.records)
    assert client.get(url + "&cursor=garbage").status_code == 400


def test_d5_query_count_does_not_grow_with_keys(
    seeded, django_assert_max_num_queries
) -> None:
    from accounts.services.api_keys import api_key_create

    client = login(seeded.alice)
    url = usage_url("acme", tz="America/New_York")
    client.get(url)
    with django_assert_max_num_queries(14):
        client.get(url)
    for i in range(100):
        key, _ = api_key_create(
            account=seeded.a, name=f"k{i}", actor=None, actor_label="t"
        )
    with django_assert_max_num_queries(14):
        assert client.get(url).status_code == 200


def test_d10_member_creates_edits_and_revokes_a_key_with_audit(seeded) -> None:
    client = login(seeded.alice)
    response = client.post(
        reverse("dashboard:keys", args=["acme"]),
        {
            "name": "ci",
            "expires_on": "2099-01-01",
            "allowed_origins": "https://app.example.com",
        },
    )
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    raw = re.search(
        r'<code id="raw-key">([^<]+)</code>', response.content.decode()
    ).group(1)
    listing = client.get(reverse("dashboard:keys", args=["acme"])).content.decode()
    assert raw not in listing  # shown once
    from accounts.keys import hash_key
    from accounts.models.api_keys import ApiKey

    key = ApiKey.objects.get(key_hash=hash_key(raw))
    assert key.created_by == seeded.alice and key.allowed_origins == [
        "https://app.example.com"
    ]
    client.post(
        reverse("dashboard:key_edit", args=["acme", key.id]),
        {"name": "ci-2", "allowed_origins": ""},
    )
    client.post(
        reverse("dashboard:key_revoke", args=["acme", key.id]),
        {"confirm": "on", "reason": "rotated"},
    )
    key.refresh_from_db()
    assert (
        key.name == "ci-2"
        and key.revoked_at is not None
        and key.revoked_by == seeded.alice
    )
    actions = list(
        AuditLog.objects.filter(object_id=str(key.id))
        .order_by("at", "id")
        .values_list("action", "actor_label")
    )
    assert actions == [
        ("key.created", "alice"),
        ("key.updated", "alice"),
        ("key.revoked", "alice"),
    ]
    assert all(raw not in str(row.changes) for row in AuditLog.objects.all())


def test_d10_key_form_errors_are_shown(seeded) -> None:
    client = login(seeded.alice)
    response = client.post(
        reverse("dashboard:keys", args=["acme"]),
        {"name": "x", "allowed_origins": "not an origin", "expires_on": "2001-01-01"},
    )
    assert response.status_code == 400
    assert (
        "scheme" in response.content.decode() or "origin" in response.content.decode()
    )


def test_logout_and_password_reset_by_email(seeded, mailoutbox) -> None:
    client = login(seeded.alice)
    assert client.post(reverse("dashboard:logout")).status_code == 302
    assert client.get(reverse("dashboard:index")).status_code == 302
    response = client.post(
        reverse("dashboard:password_reset"), {"email": "alice@example.com"}
    )
    assert response.status_code == 302
    assert len(mailoutbox) == 1 and "/dashboard/reset/" in mailoutbox[0].body


def test_rollups_carry_routes_codes_and_histograms(seeded) -> None:
    rows = UsageRollup.objects.filter(account=seeded.a, granularity="day")
    assert set(rows.values_list("route", flat=True)) == {
        "tts_ws",
        "tts_rest",
        "asr_realtime",
    }
    assert set(rows.values_list("error_code", flat=True)) == {"", "inference_failed"}
    assert (
        sum(
            sum(getattr(r, f"asr_latency_hist_{i:02d}") for i in range(18))
            for r in rows
        )
        == 2
    )


def test_alert_settings_page_saves_thresholds_and_refuses_bad_input(seeded) -> None:
    from accounts.models.alerts import QuotaAlertSettings

    client = login(seeded.alice)
    url = reverse("dashboard:alerts", args=["acme"])
    assert "80, 95, 100" in client.get(url).content.decode()
    bad = client.post(url, {"thresholds_text": "80, x", "webhook_url": "ftp://h/x"})
    assert bad.status_code == 400
    saved = client.post(
        url,
        {
            "thresholds_text": "50, 90",
            "emails_text": "ops@example.com",
            "email_enabled": "on",
            "webhook_url": "https://hooks.example.com/q",
        },
    )
    # The first webhook URL makes a signing secret, shown in this response only.
    assert saved.status_code == 200 and saved["Cache-Control"] == "no-store"
    settings_row = QuotaAlertSettings.objects.get(account=seeded.a)
    assert settings_row.webhook_secret in saved.content.decode()
    assert settings_row.thresholds == [50, 90] and settings_row.emails == [
        "ops@example.com"
    ]
    assert (
        AuditLog.objects.filter(action="alerts.changed", actor_label="alice").count()
        == 1
    )


def test_i37_hour_buckets_open_on_the_last_48_hours(seeded) -> None:
    """The default hour view is rolling: the current hour and the 47 before it, labelled
    in the viewer's zone, with usage of those hours only."""
    from accounts.buckets import floor_hour
    from accounts.services.rollups import usage_rollup
    from tests.support.dashboard_seed import _record

    now = timezone.now()
    first = floor_hour(now) - timedelta(hours=47)
    # 300 characters an hour before the range, 20 in its first hour, 1 in the last.
    for started, chars in ((first - timedelta(hours=1), 300), (first, 20), (now, 1)):
        text = started.replace(minute=0, second=0, microsecond=0).isoformat()[:16]
        row = ("prod", text, "tts_ws", "piper", "completed", "", chars, 1000, 100, [])
        _record(seeded.keys["prod"], row).save()
    usage_rollup(granularity="hour", since=first - timedelta(hours=2), until=now)
    client = login(seeded.alice)
    url = reverse("dashboard:usage", args=["acme"])
    for tz in ("UTC", "Asia/Kolkata"):
        page = client.get(url + f"?granularity=hour&tz={tz}")
        labels = chart(page)["labels"]
        local = first.astimezone(ZoneInfo(tz))
        assert labels[0] == f"{local:%Y-%m-%d %H:%M}" and len(labels) == 48
        html = page.content.decode()
        assert (
            f'<span id="range">The last 48 hours, from {local:%Y-%m-%d %H:%M}' in html
        )
        assert card(page, "tts_chars_in") == "21"
        assert 'name="from" value=""' in html  # a default stays one
    typed = client.get(url + f"?granularity=hour&tz=UTC&to={now.date()}")
    assert chart(typed)["labels"][0] == f"{now.date() - timedelta(days=1)} 00:00"
    assert 'id="range">' + f"{now.date() - timedelta(days=1)}" in typed.content.decode()
    days = chart(client.get(url))["labels"]
    assert len(days) == 7


def test_i37_filters_are_checkboxes_with_revoked_keys_folded(seeded) -> None:
    from accounts.services.api_keys import api_key_revoke

    api_key_revoke(api_key=seeded.keys["staging"], actor=None, reason="t")
    page = login(seeded.alice).get(usage_url("acme")).content.decode()
    active, revoked = page.split('<details id="revoked-keys"')
    assert f'value="{seeded.keys["prod"].id}"' in active
    assert f'value="{seeded.keys["staging"].id}"' in revoked.split("</details>")[0]
    assert '<select name="key"' not in page and 'type="checkbox" name="route"' in page
    picked = login(seeded.alice).get(
        usage_url("acme", key=str(seeded.keys["staging"].id))
    )
    assert '<details id="revoked-keys" open>' in picked.content.decode()


def test_i37_an_account_without_usage_gets_first_steps(seeded) -> None:
    from accounts.models.accounts import Account

    newco = Account.objects.create(name="Newco", slug="newco", plan=seeded.a.plan)
    newco.members.add(seeded.alice)
    page = login(seeded.alice).get(reverse("dashboard:usage", args=["newco"]))
    html = page.content.decode()
    assert page.status_code == 200 and 'id="first-visit"' in html
    assert "curl http://testserver/v1/audio/speech" in html
    assert reverse("dashboard:keys", args=["newco"]) in html
    assert "<canvas" not in html and 'id="usage-data"' not in html
    seeded_page = login(seeded.alice).get(usage_url("acme")).content.decode()
    assert 'id="first-visit"' not in seeded_page
    assert seeded_page.count('role="img"') == 6 == seeded_page.count("data-chart-table")
