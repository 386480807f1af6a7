"""The Content-Security-Policy in headless Chromium (issue 31 item 5): every HTML page of the
site works under the policy with not one violation reported. The front door (its live
status), `/docs/` (the index, pages with tables, the collapsing menu on a phone), the
dashboard (its charts), the quota alerts page (a webhook secret made and shown), the
playground (client secrets minted for both sockets, a TTS socket playing audio, the
microphone's audio worklet feeding a realtime session) and the admin (sign-in, a list, a
change form)."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from gateway.server.csp import HEADER, POLICY
from tests.e2e.conftest import screenshot
from tests.support.dashboard_seed import PASSWORD, seed

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LISTEN = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) =>
  window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


@pytest.fixture(scope="module")
def chromium_extra_args() -> list[str]:
    """A fake microphone (Chromium's beep) that needs no permission prompt."""
    return ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"]


def watched(context: Any) -> Any:
    """A page that records policy violations (events and console messages), script
    errors, and every HTML document it loads without the policy."""
    page = context.new_page()
    page.add_init_script(LISTEN)
    page.violations = []
    page.on(
        "console",
        lambda m: (
            page.violations.append(m.text)
            if "Content Security Policy" in m.text
            else None
        ),
    )
    page.on("pageerror", lambda e: page.violations.append(f"script error {e}"))

    def check(response: Any) -> None:
        if response.request.resource_type == "document":
            if response.headers.get(HEADER.lower()) != POLICY:
                page.violations.append(f"no policy on {response.url}")

    page.on("response", check)
    return page


def violations(page: Any) -> list[str]:
    return page.violations + page.evaluate("window.__csp")


def sign_in(page: Any, base: str, path: str, username: str) -> None:
    page.goto(base + path)
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("[type=submit]")
    page.wait_for_load_state("networkidle")


def test_front_door_and_docs_run_under_the_policy(
    live_gateway: str, browser_context: Any
) -> None:
    page = watched(browser_context)
    page.goto(live_gateway + "/")
    page.wait_for_load_state("networkidle")
    assert page.text_content("#status-word") in ("ready", "not ready")
    for path in ("/docs/", "/docs/deploy/", "/docs/operations/"):
        page.goto(live_gateway + path)
        page.wait_for_load_state("networkidle")
    assert violations(page) == [], "front door and docs"

    phone = watched(
        browser_context.browser.new_context(viewport={"width": 390, "height": 844})
    )
    phone.goto(live_gateway + "/docs/cli/")
    phone.click("#docs-toggle")  # nav.js shows the button and opens the menu
    phone.wait_for_selector("#docs-menu", state="visible")
    screenshot(phone, "csp-docs-phone")
    assert violations(phone) == [], "docs on a phone"


@pytest.fixture
def alice(live_gateway: str, browser_context: Any) -> Any:
    """A watched page signed in as alice, a member of the seeded ``acme``."""
    seed(now=timezone.now())
    page = watched(browser_context)
    sign_in(page, live_gateway, "/dashboard/", "alice")
    return page


def test_dashboard_and_alerts_run_under_the_policy(
    live_gateway: str, alice: Any
) -> None:
    page = alice
    page.goto(live_gateway + "/dashboard/acme/usage/?from=2026-03-06&to=2026-03-10")
    page.wait_for_function("() => !!Chart.getChart(document.querySelector('canvas'))")
    assert violations(page) == [], "dashboard"

    page.goto(live_gateway + "/dashboard/acme/alerts/")
    page.click("#rotate-secret [type=submit]")
    page.wait_for_selector("#new-secret #secret-value")
    screenshot(page, "csp-alerts")
    assert violations(page) == [], "alerts"


def test_playground_runs_under_the_policy(live_gateway: str, alice: Any) -> None:
    page = alice
    minted: list[str] = []
    page.on(
        "request",
        lambda r: (
            minted.append(r.post_data or "")
            if r.method == "POST" and "/client-secret" in r.url
            else None
        ),
    )
    page.goto(live_gateway + "/playground/acme/")
    page.wait_for_selector("#tts-play:not([disabled])", timeout=15000)
    page.fill("#tts-text", "Short and sweet.")
    page.click("#tts-play")
    page.wait_for_function(
        "() => Number(document.getElementById('tts-player').dataset.samples) > 0",
        timeout=15000,
    )

    page.click("#asr-start")  # the worklet, the resampler, a realtime socket
    page.wait_for_function(
        "() => Number(document.getElementById('asr-state').dataset.sentMs) >= 1000",
        timeout=20000,
    )
    page.click("#asr-stop")
    page.wait_for_function(
        "() => document.getElementById('asr-state').textContent === 'Microphone off.'",
        timeout=20000,
    )
    screenshot(page, "csp-playground")
    assert sorted(minted) == ["use=realtime", "use=tts"]  # one secret per socket
    assert violations(page) == [], "playground"


def test_admin_runs_under_the_policy(live_gateway: str, browser_context: Any) -> None:
    from django.contrib.auth.models import User

    User.objects.create_superuser("root", "root@example.com", PASSWORD)
    admin = watched(browser_context)
    sign_in(admin, live_gateway, "/admin/login/", "root")
    for path in ("/admin/", "/admin/accounts/apikey/", "/admin/accounts/plan/add/"):
        admin.goto(live_gateway + path)
        admin.wait_for_load_state("networkidle")
    screenshot(admin, "csp-admin")
    assert violations(admin) == [], "admin"
