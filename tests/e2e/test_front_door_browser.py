"""The way in, in headless Chromium: the front door → the docs → sign in (issue 36).

Screenshots land in var/artifacts/e2e/ (front-door, docs-quickstart, sign-in, signed-in).
The way loads nothing from another origin and no request gets an error (a missing favicon
included). That every page fits a phone, with its menus collapsed, is test_pages_fit.py's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import gateway_on_test_db, screenshot, watched
from tests.support.members import account_member

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
PASSWORD = "correct-horse-battery"


@pytest.fixture(scope="module")
def site(
    django_db_setup: None,
    django_db_blocker: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """A gateway on this run's test database, its fake engines loaded."""
    with gateway_on_test_db(
        tmp_path_factory, django_db_blocker, wait_path="/readyz"
    ) as url:
        yield url


@pytest.fixture
def member(site: str) -> str:
    """A member of one account; returns the username."""
    user, _ = account_member("ravi", PASSWORD)
    return str(user.username)


def test_landing_then_docs_then_sign_in(
    browser_context: Any, site: str, member: str
) -> None:
    page = watched(browser_context, site)
    page.clock.install()
    page.goto(site + "/")
    assert page.locator("h1").inner_text() == "veena speech gateway"
    assert page.get_attribute("#status", "data-ready") == "true"
    assert page.locator("[data-kind=tts] .engine-names").inner_text() == "fake/tone"
    assert page.locator("[data-kind=asr] .worker-count").inner_text() == "1 worker"
    screenshot(page, "front-door")

    # The status is live: /readyz is asked again every 10 s and the panel follows it.
    body = {
        "ready": False,
        "database": True,
        "channel_layer": True,
        "workers": {"tts": 0, "asr": 1},
        "engines": {"asr": ["fake/words.en"]},
    }
    page.route("**/readyz", lambda route: route.fulfill(status=503, json=body))
    page.clock.run_for(11_000)
    page.wait_for_selector("#status[data-ready=false]")
    assert page.locator("#status-word").inner_text() == "not ready"
    assert (
        page.locator("[data-kind=tts] .engine-names").inner_text() == "no engine loaded"
    )
    page.unroute("**/readyz")
    page.problems.remove(f"503 {site}/readyz")  # the answer this test made up

    page.click("header.site >> text=Docs")
    page.wait_for_url(site + "/docs/")
    assert page.locator("article h1").inner_text() == "Documentation"
    page.click("nav.docs-nav >> text=Quickstart")
    page.wait_for_url(site + "/docs/quickstart/")
    screenshot(page, "docs-quickstart")
    page.click("article >> a[href='/docs/clients/#sdk-pitfalls'] >> nth=0")
    page.wait_for_url(site + "/docs/clients/#sdk-pitfalls")
    assert page.locator("#sdk-pitfalls").is_visible()
    page.click("nav.docs-nav >> text=OpenAPI (JSON)")
    page.wait_for_url(site + "/v1/openapi.json")
    assert '"openapi": "3.1.0"' in page.content()
    page.go_back()

    page.click("header.site >> text=Sign in")
    page.wait_for_url(site + "/dashboard/login/")
    screenshot(page, "sign-in")
    page.click("text=What it is, its status and its docs")
    page.wait_for_url(site + "/")
    page.click("section.hero >> text=Sign in")
    page.fill("input[name=username]", member)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(site + "/dashboard/acme/usage/")
    screenshot(page, "signed-in")
    assert page.problems == [] and page.foreign_requests == []
