"""Operator controls and alerts in headless Chromium (issue 32): the admin's plan, account,
quota, usage and audit pages at 1280 px, and a member's alerts page with its per-field
errors, saved confirmation, shown-once secret and a test event a local receiver verifies."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from accounts.models.accounts import Account
from accounts.models.alerts import QuotaAlertSettings
from accounts.models.plans import Plan
from accounts.models.usage import UsageRecord
from accounts.services.api_keys import api_key_create, api_key_revoke
from accounts.services.quota_overrides import quota_override_create
from tests.accounts.test_webhooks import documented_python_verifier
from tests.e2e.conftest import screenshot
from tests.support.receiver import serving

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
PASSWORD = "correct-horse-battery"
WIDTH = 1280


class Receiver(BaseHTTPRequestHandler):
    """Checks each delivery with the documented verifier and the account's secret."""

    results: list[bool] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        secret = QuotaAlertSettings.objects.get(account__slug="acme").webhook_secret
        valid = documented_python_verifier()(
            secret, self.headers.get("Veena-Signature", ""), body
        )
        Receiver.results.append(valid)
        self.send_response(204 if valid else 400)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.results = []
    with serving(Receiver) as url:
        yield url


@pytest.fixture
def world(live_gateway: str) -> dict[str, Any]:
    plan = Plan.objects.create(
        name="Pro",
        requests_per_minute=600,
        max_concurrent_streams=2,
        monthly_tts_characters=100_000,
        monthly_asr_seconds=3_600,
        max_session_seconds=600,
    )
    account = Account.objects.create(name="Acme", slug="acme", plan=plan)
    member = User.objects.create_user("mia", "mia@example.com", PASSWORD)
    User.objects.create_superuser("root", "root@example.com", PASSWORD)
    account.members.add(member)
    key, _ = api_key_create(account=account, name="prod", actor=None, actor_label="t")
    old, _ = api_key_create(account=account, name="old", actor=None, actor_label="t")
    api_key_revoke(api_key=old, actor=None, reason="rotated to prod")
    quota_override_create(
        account=account,
        metric="tts_characters",
        kind="top_up",
        amount=50_000,
        ends_at=timezone.now() + timedelta(days=10),
        reason="launch week",
        actor=None,
        actor_label="seed",
    )
    now = timezone.now()
    for minutes in (30, 5, 50, 1, 15):  # stored out of order
        UsageRecord.objects.create(
            id=uuid.uuid4(),
            stream_id=uuid.uuid4(),
            request_id=f"req-{minutes}",
            account=account,
            api_key=key,
            endpoint="tts",
            route="tts_ws",
            model="maya-research/veena-tts",
            status="failed" if minutes == 5 else "completed",
            error_code="inference_failed" if minutes == 5 else "",
            started_at=now - timedelta(minutes=minutes),
            ended_at=now - timedelta(minutes=minutes) + timedelta(seconds=3),
            last_checkpoint_at=now - timedelta(minutes=minutes),
            period=now.strftime("%Y-%m"),
            instance="test:1",
            tts_chars_in=minutes * 10,
        )
    return {"account": account, "key": key}


def sign_in(context: Any, url: str, username: str) -> Any:
    page = context.new_page()
    page.goto(url)
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("[type=submit]")
    page.wait_for_load_state("networkidle")
    return page


def fits(page: Any) -> bool:
    """Nothing runs off to the right of a 1280-pixel window, nor scrolls inside a list."""
    return page.evaluate(
        """(width) => document.documentElement.scrollWidth <= width &&
            [...document.querySelectorAll('.results')].every(
                (el) => el.scrollWidth <= el.clientWidth)""",
        WIDTH,
    )


def no_inline_script(page: Any) -> bool:
    """CSP-ready: every script is a file, and no element has an ``on…`` handler."""
    return page.evaluate(
        """() => document.querySelectorAll('script:not([src])').length === 0 &&
            ![...document.querySelectorAll('*')].some(
                (el) => [...el.attributes].some((a) => a.name.startsWith('on')))"""
    )


def test_admin_pages_an_operator_reads(live_gateway, world, browser_context) -> None:
    page = sign_in(browser_context, live_gateway + "/admin/login/", "root")
    page.goto(live_gateway + "/admin/accounts/plan/add/")
    boxes = page.locator("input[type=checkbox][name=allowed_endpoints]")
    assert boxes.count() == 2
    screenshot(page, "admin-plan-add")

    page.goto(live_gateway + "/admin/accounts/usagerecord/")
    started = page.locator("#result_list tbody .field-started").all_inner_texts()
    assert len(started) == 5 and started == sorted(started, reverse=True)
    screenshot(page, "admin-usage-records")
    results = page.locator(".results").bounding_box()
    assert results
    for column in ("field-status", "field-error_code", "field-units", "field-seconds"):
        box = page.locator(f"#result_list tbody td.{column}").first.bounding_box()
        assert box and box["x"] + box["width"] <= results["x"] + results["width"]
    assert fits(page)

    account = world["account"]
    page.goto(live_gateway + f"/admin/accounts/account/{account.pk}/change/")
    quota = page.locator(".field-quota").inner_text()
    assert "150,000 characters (plan Pro + 50,000 top-up until" in quota
    assert page.locator("a", has_text="usage dashboard").count() == 1
    screenshot(page, "admin-account")

    page.goto(live_gateway + f"/admin/accounts/quotaoverride/add/?account={account.pk}")
    page.select_option("select[name=metric]", "asr_audio_ms")
    page.select_option("select[name=kind]", "top_up")
    page.fill("input[name=amount]", "600")
    page.fill("textarea[name=reason]", "pilot with call-centre audio")
    screenshot(page, "admin-quota-override-add")
    page.click("input[name=_save]")
    page.wait_for_load_state("networkidle")
    assert "was added successfully" in page.content()
    screenshot(page, "admin-quota-overrides")

    page.goto(live_gateway + "/admin/accounts/auditlog/")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() >= 4
    text = page.locator("#result_list").inner_text()
    assert world["key"].key_prefix in text and "(old)" in text
    assert "rotated to prod" in text and "pilot with call-centre audio" in text
    assert (
        page.locator(
            "#content-main select[name=action], #content-main a.addlink"
        ).count()
        == 0
    )
    assert fits(page)
    screenshot(page, "admin-audit-log")


def test_alerts_page_errors_saves_and_sends_a_signed_test(
    live_gateway, world, browser_context, receiver
) -> None:
    page = sign_in(browser_context, live_gateway + "/dashboard/login/", "mia")
    page.goto(live_gateway + "/dashboard/acme/alerts/")
    assert page.locator("label[for=id_webhook_url]").inner_text() == "Webhook URL"
    assert no_inline_script(page)
    page.fill("input[name=thresholds_text]", "80, lots")
    page.fill("input[name=webhook_url]", "ftp://example.com/hook")
    page.click("#alert-settings button[type=submit]")
    page.wait_for_load_state("networkidle")
    errors = page.locator(".field-error").all_inner_texts()
    assert errors == ["Enter whole numbers.", "Use an http:// or https:// URL."]
    assert page.locator(".field.has-error").count() == 2
    screenshot(page, "alerts-field-errors")

    page.fill("input[name=thresholds_text]", "50, 90, 100")
    page.fill("input[name=webhook_url]", receiver)
    page.click("#alert-settings button[type=submit]")
    page.wait_for_load_state("networkidle")
    assert "Alert settings saved." in page.locator("#notices").inner_text()
    secret = page.inner_text("#secret-value")
    assert secret.startswith("whsec_")
    screenshot(page, "alerts-saved-secret")

    page.goto(live_gateway + "/dashboard/acme/alerts/")
    assert secret not in page.content()
    assert secret[-4:] in page.inner_text("#secret-hint")
    page.click("#send-test button")
    page.wait_for_load_state("networkidle")
    assert "Test event delivered: HTTP 204." in page.inner_text("#notices")
    assert Receiver.results == [True]
    status = page.locator("#deliveries tbody tr").first.get_attribute("data-status")
    assert status == "delivered"
    assert no_inline_script(page) and fits(page)
    screenshot(page, "alerts-test-delivered")
