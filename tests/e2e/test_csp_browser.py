"""The Content-Security-Policy in headless Chromium (issue 31 item 5): the dashboard (its
charts), the playground (its token, its voices, a TTS socket playing audio) and the admin
(sign-in, a list, a change form) work under the policy with not one violation reported."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from gateway.csp import HEADER, POLICY
from tests.e2e.conftest import screenshot
from tests.support.dashboard_seed import PASSWORD, seed

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LISTEN = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) =>
  window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


def watched(context: Any) -> Any:
    """A page that records policy violations (events and console messages) and checks
    every HTML document it loads carries the policy."""
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

    def check(response: Any) -> None:
        if response.request.resource_type == "document":
            assert response.headers.get(HEADER.lower()) == POLICY, response.url

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


def test_dashboard_playground_and_admin_run_under_the_policy(
    live_gateway: str, browser_context: Any
) -> None:
    from django.contrib.auth.models import User

    seed(now=timezone.now())
    User.objects.create_superuser("root", "root@example.com", PASSWORD)

    page = watched(browser_context)
    sign_in(page, live_gateway, "/dashboard/", "alice")
    page.goto(live_gateway + "/dashboard/acme/usage/?from=2026-03-06&to=2026-03-10")
    page.wait_for_function("() => !!Chart.getChart(document.querySelector('canvas'))")
    assert violations(page) == [], "dashboard"

    page.goto(live_gateway + "/playground/acme/")
    page.wait_for_selector("#tts-play:not([disabled])", timeout=15000)
    page.fill("#tts-text", "Short and sweet.")
    page.click("#tts-play")
    page.wait_for_function(
        "() => Number(document.getElementById('tts-player').dataset.samples) > 0",
        timeout=15000,
    )
    screenshot(page, "csp-playground")
    assert violations(page) == [], "playground"

    admin = watched(browser_context.browser.new_context())
    sign_in(admin, live_gateway, "/admin/login/", "root")
    for path in ("/admin/", "/admin/accounts/apikey/", "/admin/accounts/plan/add/"):
        admin.goto(live_gateway + path)
        admin.wait_for_load_state("networkidle")
    screenshot(admin, "csp-admin")
    assert violations(admin) == [], "admin"
