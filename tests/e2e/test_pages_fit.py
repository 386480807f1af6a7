"""Every page on a desktop and on a 390 px phone (issue 37): the front door, every page
``/docs/`` serves, the dashboard and the playground.

Each page is opened in headless Chromium at 1280×800 and at 390×844; the document must be
no wider than the window (no sideways scrolling), and a full-page screenshot of each is kept
in ``var/artifacts/e2e/pages/``. On the phone the header's menu, and the docs' list of pages,
are collapsed behind a button; without JavaScript they stay open.
The same pages carry the first-visit state, the hour view's default range, the filters'
checkbox lists and the charts' text alternatives, which are checked where they appear.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import av
import pytest
from django.utils import timezone

from tests.e2e.conftest import ARTIFACTS, watched
from tests.support.dashboard_seed import FIRST, LAST, PASSWORD, seed

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

VIEWPORTS = {"desktop": (1280, 800), "phone": (390, 844)}
SHOTS = ARTIFACTS / "pages"
SEEDED = f"from={FIRST}&to={LAST}&tz=UTC"


@dataclass(frozen=True)
class Site:
    """The seeded accounts and the ids the pages need."""

    base: str
    prod_key: str
    staging_key: str
    revoked_key: str


@pytest.fixture
def site(live_gateway: str) -> Site:
    """The dashboard seed, plus a revoked key of Acme and a new account with no usage."""
    from django.contrib.auth.models import User

    from accounts.models.accounts import Account
    from accounts.services.api_keys import api_key_create, api_key_revoke

    seeded = seed(now=timezone.now())
    old, _ = api_key_create(
        account=seeded.a, name="old laptop", actor=None, actor_label="tests"
    )
    api_key_revoke(api_key=old, actor=None, reason="lost")
    newco = Account.objects.create(name="Newco", slug="newco", plan=seeded.a.plan)
    nina = User.objects.create_user("nina", "nina@example.com", PASSWORD)
    newco.members.add(nina)
    duo = User.objects.create_user("duo", "duo@example.com", PASSWORD)
    seeded.a.members.add(duo)
    newco.members.add(duo)
    return Site(
        live_gateway,
        str(seeded.keys["prod"].id),
        str(seeded.keys["staging"].id),
        str(old.id),
    )


def pages_of(site: Site) -> dict[str | None, list[tuple[str, str]]]:
    """user (None: signed out) → [(screenshot name, path)]."""
    return {
        None: [
            ("login", "/dashboard/login/"),
            ("password-reset", "/dashboard/password-reset/"),
            ("password-reset-sent", "/dashboard/password-reset/sent/"),
            ("password-reset-expired", "/dashboard/reset/MQ/set-password/"),
            ("password-reset-complete", "/dashboard/reset/done/"),
        ],
        "alice": [
            ("usage", f"/dashboard/acme/usage/?{SEEDED}"),
            ("usage-hours", "/dashboard/acme/usage/?granularity=hour&tz=UTC"),
            ("requests", f"/dashboard/acme/requests/?{SEEDED}"),
            ("keys", "/dashboard/acme/keys/"),
            ("key-edit", f"/dashboard/acme/keys/{site.prod_key}/"),
            ("key-revoke", f"/dashboard/acme/keys/{site.staging_key}/revoke/"),
            ("alerts", "/dashboard/acme/alerts/"),
            ("playground", "/playground/acme/"),
        ],
        "staff": [
            ("accounts", "/dashboard/"),
            ("all-accounts", f"/dashboard/all/?{SEEDED}"),
            ("playground-no-account", "/playground/"),
        ],
        "nina": [
            ("first-visit", "/dashboard/newco/usage/"),
            ("keys-none", "/dashboard/newco/keys/"),
        ],
        "duo": [
            ("account-picker", "/dashboard/"),
            ("playground-picker", "/playground/"),
        ],
    }


@pytest.fixture(params=list(VIEWPORTS))
def viewport(
    request: pytest.FixtureRequest, chromium: Any
) -> Iterator[tuple[str, Any]]:
    """A fresh context at one viewport size: (its name, a factory of signed-in pages)."""
    name = request.param
    width, height = VIEWPORTS[name]
    context = chromium.new_context(viewport={"width": width, "height": height})
    yield name, context
    context.close()


def signed_in(context: Any, base: str, user: str | None) -> Any:
    context.clear_cookies()
    page = context.new_page()
    if user is None:
        return page
    page.goto(base + "/dashboard/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")
    return page


@contextlib.contextmanager
def opened(
    chromium: Any, site: Site, user: str, path: str, *, viewport: str = "phone"
) -> Iterator[Any]:
    """``path`` opened by ``user`` in a fresh context of the viewport's size."""
    width, height = VIEWPORTS[viewport]
    context = chromium.new_context(
        viewport={"width": width, "height": height}, accept_downloads=True
    )
    try:
        page = signed_in(context, site.base, user)
        page.goto(site.base + path)
        yield page
    finally:
        context.close()


def shot(page: Any, viewport: str, name: str, *, full_page: bool = True) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{viewport}-{name}.png"), full_page=full_page)


def assert_fits(page: Any, label: str) -> None:
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth, document.body.scrollWidth,"
        " window.innerWidth]"
    )
    assert max(widths[:2]) <= widths[2], (label, widths)


def test_every_page_fits_the_window_on_desktop_and_phone(
    site: Site, viewport: tuple[str, Any]
) -> None:
    name, context = viewport
    for user, pages in pages_of(site).items():
        page = signed_in(context, site.base, user)
        for shot_name, path in pages:
            response = page.goto(site.base + path)
            assert response.ok, (path, response.status)
            if path.startswith("/playground/"):
                page.wait_for_load_state("networkidle")  # the voices arrive
            assert_fits(page, f"{name} {shot_name}")
            shot(page, name, shot_name)
            if user is not None:
                check_menu(page, name, shot_name, keep_open=shot_name == "usage")
        page.close()
    page = signed_in(context, site.base, "alice")
    page.goto(site.base + "/dashboard/acme/keys/")
    page.fill("#create-key input[name=name]", f"ci {name}")
    page.click("#create-key button[type=submit]")
    assert_fits(page, f"{name} key-created")
    shot(page, name, "key-created")


SITE_MENU = ("#site-menu", "#menu-toggle")  # the header's, on every page
DOCS_MENU = ("#docs-menu", "#docs-toggle")  # the list of pages, on /docs/


def check_menu(
    page: Any,
    viewport: str,
    name: str,
    ids: tuple[str, str] = SITE_MENU,
    *,
    keep_open: bool = False,
) -> None:
    """The menu is open on a desktop; on a phone it opens from its button (a screenshot
    of it open with ``keep_open``) and Escape closes it."""
    menu, toggle = page.locator(ids[0]), page.locator(ids[1])
    if viewport == "desktop":
        assert menu.is_visible() and not toggle.is_visible(), (name, ids)
        return
    assert toggle.is_visible() and not menu.is_visible(), (name, ids)
    assert toggle.get_attribute("aria-expanded") == "false"
    toggle.click()
    assert menu.is_visible() and toggle.get_attribute("aria-expanded") == "true"
    assert_fits(page, f"{viewport} {name} {ids[0]} open")
    if keep_open:
        shot(page, viewport, f"{name}-menu-open")
    page.keyboard.press("Escape")
    assert not menu.is_visible() and toggle.get_attribute("aria-expanded") == "false"


def site_pages() -> list[tuple[str, str]]:
    """(screenshot name, path) of the front door and of every page /docs/ serves."""
    from django.conf import settings

    from veena_site import markdown_pages as mp

    docs = [
        ("docs-" + name.replace("/", "-"), page.url)
        for name, page in mp.pages(settings.BASE_DIR).items()
    ]
    return [("front-door", "/"), ("docs", "/docs/"), *docs]


def test_the_front_door_and_every_docs_page_fit_desktop_and_phone(
    live_gateway: str, viewport: tuple[str, Any]
) -> None:
    name, context = viewport
    page = watched(context, live_gateway)
    for shot_name, path in site_pages():
        response = page.goto(live_gateway + path)
        assert response.ok, (path, response.status)
        assert_fits(page, f"{name} {shot_name}")
        # The long pages whole on the phone, where they wrap; their first screen on a
        # desktop (whole, they took 20 s more to encode and said nothing new).
        shot(page, name, shot_name, full_page=name == "phone" or path == "/")
        check_menu(page, name, shot_name, keep_open=shot_name == "front-door")
        if path.startswith("/docs/"):
            check_menu(page, name, shot_name, DOCS_MENU, keep_open=path == "/docs/")
    assert page.problems == [] and page.foreign_requests == []


def test_without_javascript_the_menus_stay_open(
    live_gateway: str, chromium: Any
) -> None:
    width, height = VIEWPORTS["phone"]
    context = chromium.new_context(
        viewport={"width": width, "height": height}, java_script_enabled=False
    )
    try:
        page = context.new_page()
        page.goto(live_gateway + "/docs/quickstart/")
        assert_fits(page, "phone without script")
        for menu, toggle in (SITE_MENU, DOCS_MENU):
            assert page.locator(menu).is_visible()
            assert not page.locator(toggle).is_visible()
        shot(page, "phone", "docs-quickstart-no-script")
    finally:
        context.close()


def test_the_hour_view_opens_on_the_last_48_hours(site: Site, chromium: Any) -> None:
    path = "/dashboard/acme/usage/?granularity=hour&tz=UTC"
    with opened(chromium, site, "alice", path) as page:
        hour_view(page)


def hour_view(page: Any) -> None:
    labels = page.evaluate(
        "() => Chart.getChart(document.querySelector('canvas[data-chart=requests]'))"
        ".data.labels"
    )
    now = datetime.now(UTC)
    hours = [
        now - timedelta(hours=n) for n in (47, 48)
    ]  # the hour may just have turned
    assert labels[0] in [f"{h:%Y-%m-%d %H}:00" for h in hours]
    assert labels[-1] in [f"{h + timedelta(hours=47):%Y-%m-%d %H}:00" for h in hours]
    assert len(labels) == 48
    assert (
        page.locator("#range")
        .inner_text()
        .startswith(f"The last 48 hours, from {labels[0]}")
    )
    assert page.input_value("input[name=from]") == ""  # the default stays a default


def test_filters_are_checkbox_lists_with_key_names_and_revoked_keys_tucked_away(
    site: Site, chromium: Any
) -> None:
    with opened(chromium, site, "alice", f"/dashboard/acme/requests/?{SEEDED}") as page:
        filters(page, site)


def filters(page: Any, site: Site) -> None:
    from accounts.models.choices import Route

    keys = page.locator("#key-filter label.check")
    shown = [t.split()[0] for t in keys.all_inner_texts() if t.strip()]
    assert shown[:2] == ["prod", "staging"]  # by name, before their short forms
    revoked = page.locator(f"#key-filter input[value='{site.revoked_key}']")
    assert not revoked.is_visible()
    page.click("#revoked-keys summary")
    assert revoked.is_visible()
    assert "old laptop" in page.inner_text("#revoked-keys")
    routes = page.locator("#route-filter input[type=checkbox]")
    assert routes.count() == len(Route.choices)
    page.check(f"#key-filter input[value='{site.staging_key}']")
    page.check("#status-filter input[value=failed]")
    page.click("#filters button[type=submit]")
    page.wait_for_load_state("networkidle")
    assert f"key={site.staging_key}" in page.url and "status=failed" in page.url
    assert page.is_checked(f"#key-filter input[value='{site.staging_key}']")
    assert page.locator("#records tbody tr[data-record]").count() >= 1
    statuses = page.locator("#records tbody tr td.status").all_inner_texts()
    assert {text.split()[0] for text in statuses} == {"failed"}  # "failed ×3": folded
    shot(page, "phone", "requests-filtered")


def test_charts_have_a_text_alternative_with_their_values(
    site: Site, chromium: Any
) -> None:
    path = f"/dashboard/acme/usage/?{SEEDED}"
    with opened(chromium, site, "alice", path, viewport="desktop") as page:
        chart_alternatives(page)


def chart_alternatives(page: Any) -> None:
    for canvas in page.locator("canvas[data-chart]").all():
        metric = canvas.get_attribute("data-chart")
        assert canvas.get_attribute("role") == "img"
        described = canvas.get_attribute("aria-describedby")
        assert page.inner_text(f"#{described}").strip(), metric
        assert page.locator(f"table[data-chart-table={metric}]").count() == 1
    summary = page.inner_text("#sum-requests")
    assert summary.startswith("6 requests over 3 days;")
    cells = page.locator(
        "table[data-chart-table=requests] tbody td"
    ).all_text_contents()
    assert cells == ["0", "3", "3"]  # the chart's own values (the seed's)


def test_a_first_visit_says_create_a_key_then_run_this(
    site: Site, chromium: Any, tmp_path: Path
) -> None:
    with opened(chromium, site, "nina", "/dashboard/newco/usage/") as page:
        first_visit(page, site, tmp_path)


def first_visit(page: Any, site: Site, tmp_path: Path) -> None:
    intro = page.inner_text("#first-visit")
    assert "Create a key" in intro and "run this" in intro
    assert page.locator("canvas").count() == 0
    command = page.inner_text("#first-request")
    assert f"curl {site.base}/v1/audio/speech" in command
    assert "$VEENA_API_KEY" in command
    page.click("#first-visit a[href$='/keys/']")
    page.fill("#create-key input[name=name]", "first")
    page.click("#create-key button[type=submit]")
    raw = page.inner_text("#raw-key").strip()
    command = page.inner_text("#first-request")
    assert raw in command  # on the key's own page the command is filled in with it
    done = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    with av.open(str(tmp_path / "hello.mp3")) as container:
        stream = container.streams.audio[0]
        assert sum(f.samples for f in container.decode(stream)) > 0
    page.goto(site.base + "/dashboard/newco/usage/")
    assert page.locator("#first-visit").count() == 0  # the first request ended it


def test_the_playground_counts_characters_and_offers_download_only_with_audio(
    site: Site, chromium: Any
) -> None:
    with opened(chromium, site, "alice", "/playground/acme/") as page:
        playground(page)


def playground(page: Any) -> None:
    page.wait_for_selector("#tts-play:not([disabled])")
    download = page.locator("#tts-download")
    assert not download.is_visible()  # no audio yet
    text = "Twenty-six characters now."
    page.fill("#tts-text", text)
    assert page.inner_text("#tts-chars") == (
        "26 characters · 1,500 of 10,000 left this month"  # the seed: 8,500 used
    )
    page.click("#tts-play")
    page.wait_for_selector("#tts-metrics[data-total-bytes]", timeout=60_000)
    assert download.is_visible()
    page.wait_for_function(
        "() => document.getElementById('tts-chars').textContent.includes('1,474 of')",
        timeout=15_000,
    )
    page.fill("#tts-text", "x" * 1500 + " too long")
    assert "only 1,474 left this month" in page.inner_text("#tts-chars")
    page.click("#tts-play")
    page.wait_for_function(
        "() => document.getElementById('tts-state').classList.contains('error')",
        timeout=30_000,
    )
    state = page.inner_text("#tts-state")
    assert "this text has 1,509, and 1,474 of 10,000 are left" in state, state
    assert "QUOTA_EXCEEDED" in state
    assert not download.is_visible()  # that request made no audio
    assert_fits(page, "playground after a quota error")
    shot(page, "phone", "playground-quota-error")
