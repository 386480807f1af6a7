"""The usage dashboard in headless Chromium (accounts V3, issue 14).

Numbers are read from the page itself (the charts' Chart.js data, the cards' and tables'
``data-value`` attributes), never from a view's context.
"""

from __future__ import annotations

import csv
import io
import json
import threading
import time
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from tests.e2e.conftest import record_foreign_requests, screenshot
from tests.support.dashboard_seed import FIRST, LAST, PASSWORD, at, seed

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
MAR7 = int(at("2026-03-07T00:00").timestamp())


@pytest.fixture
def seeded(live_gateway: str):
    return seed(now=timezone.now())


def sign_in(context: Any, base: str, username: str) -> Any:
    page = context.new_page()
    record_foreign_requests(page, base)
    page.goto(base + "/dashboard/")
    assert "/dashboard/login/" in page.url
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")
    return page


def chart_values(page: Any, metric: str) -> list[Any]:
    return page.evaluate(
        """(metric) => {
            const canvas = document.querySelector(`canvas[data-chart="${metric}"]`);
            const chart = Chart.getChart(canvas);
            return chart ? chart.data.datasets[0].data : null;
        }""",
        metric,
    )


def chart_labels(page: Any, metric: str) -> list[str]:
    return page.evaluate(
        "(m) => Chart.getChart(document.querySelector(`canvas[data-chart='${m}']`)).data.labels",
        metric,
    )


def card(page: Any, metric: str) -> str:
    return page.get_attribute(f"#cards [data-metric={metric}]", "data-value")


def usage_path(slug: str, **query: str) -> str:
    params = {"from": FIRST, "to": LAST, **query}
    return f"/dashboard/{slug}/usage/?" + "&".join(
        f"{k}={v}" for k, v in params.items()
    )


def test_member_signs_in_and_the_charts_show_the_seeded_usage(
    live_gateway, seeded, browser_context
) -> None:
    page = sign_in(browser_context, live_gateway, "alice")
    assert (
        page.url.endswith("/dashboard/acme/usage/")
        or "/dashboard/acme/usage/" in page.url
    )
    page.goto(live_gateway + usage_path("acme", tz="UTC"))
    for metric in (
        "tts_chars_in",
        "tts_audio_out_s",
        "asr_audio_in_s",
        "requests",
        "errors",
        "latency",
    ):
        canvas = page.locator(f"canvas[data-chart={metric}]")
        box = canvas.bounding_box()
        assert box and box["width"] > 100 and box["height"] > 100, metric
        assert page.evaluate(
            "(m) => !!Chart.getChart(document.querySelector(`canvas[data-chart='${m}']`))",
            metric,
        ), metric
    assert chart_values(page, "tts_chars_in") == [0, 340, 300]
    assert chart_values(page, "requests") == [0, 3, 3]
    assert chart_values(page, "tts_audio_out_s") == [0, 6, 6.5]
    assert card(page, "requests") == "6" and card(page, "errors") == "2"
    row = page.locator(
        f"#by-key tr[data-key='{seeded.keys['prod'].id}'] [data-metric=requests]"
    )
    assert row.get_attribute("data-value") == "4"
    assert "7777" not in page.content()
    screenshot(page, "usage-utc-days")
    assert page.foreign_requests == []


@pytest.mark.parametrize("browser_context", ["America/New_York"], indirect=True)
def test_the_viewers_zone_and_hour_buckets_change_the_buckets(
    live_gateway, seeded, browser_context
) -> None:
    page = sign_in(browser_context, live_gateway, "alice")
    # No zone in the URL: the pages store the browser's own zone in a cookie (from the
    # sign-in page on), and the server reads days in it.
    page.goto(live_gateway + f"/dashboard/acme/usage/?from={FIRST}&to={LAST}")
    assert page.inner_text("#viewer-tz") == "America/New_York"
    assert chart_values(page, "tts_chars_in") == [100, 540, 0]
    screenshot(page, "usage-new-york-days")
    page.select_option("select[name=granularity]", "hour")
    page.fill("input[name=from]", "2026-03-08")
    page.fill("input[name=to]", "2026-03-08")
    page.click("#filters button[type=submit]")
    page.wait_for_load_state("networkidle")
    assert "granularity=hour" in page.url
    labels = chart_labels(page, "requests")
    assert len(labels) == 23 and "2026-03-08 02:00" not in labels  # spring forward
    assert sum(chart_values(page, "requests")) == 3
    page.fill("input[name=tz]", "UTC")
    page.click("#filters button[type=submit]")
    page.wait_for_load_state("networkidle")
    assert len(chart_labels(page, "requests")) == 24
    assert sum(chart_values(page, "requests")) == 3  # 04:30Z, 05:30Z and 12:10Z
    screenshot(page, "usage-utc-hours")


def test_the_csv_download_matches_the_page(
    live_gateway, seeded, browser_context
) -> None:
    page = sign_in(browser_context, live_gateway, "alice")
    page.goto(live_gateway + usage_path("acme", tz="Asia/Kolkata"))
    with page.expect_download() as info:
        page.click("#csv-link")
    text = open(info.value.path(), encoding="utf-8").read()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert sum(int(r["requests"]) for r in rows) == int(card(page, "requests"))
    assert sum(int(r["errors"]) for r in rows) == int(card(page, "errors"))
    assert sum(Decimal(r["asr_audio_seconds"]) for r in rows) * 1000 == int(
        card(page, "asr_audio_in_ms")
    )
    per_bucket: dict[str, int] = {}
    for r in rows:
        per_bucket[r["bucket_start"]] = per_bucket.get(r["bucket_start"], 0) + int(
            r["tts_characters"]
        )
    assert list(per_bucket.values()) == chart_values(page, "tts_chars_in")
    by_key: dict[str, int] = {}
    for r in rows:
        if r["api_key_id"]:
            by_key[r["api_key_id"]] = by_key.get(r["api_key_id"], 0) + int(
                r["requests"]
            )
    for key_id, requests in by_key.items():
        cell = page.locator(f"#by-key tr[data-key='{key_id}'] [data-metric=requests]")
        assert int(cell.get_attribute("data-value")) == requests


def test_a_member_cannot_see_another_account(
    live_gateway, seeded, browser_context
) -> None:
    page = sign_in(browser_context, live_gateway, "alice")
    beta_key = seeded.keys["beta-key"].id
    for path in (
        usage_path("beta"),
        "/dashboard/beta/requests/",
        "/dashboard/beta/keys/",
        usage_path("acme", key=str(beta_key)),
        "/dashboard/all/",
    ):
        response = page.goto(live_gateway + path)
        assert response.status == 403, path
        assert "7777" not in page.content() and "Beta" not in page.content()
    for path in (
        usage_path("beta").replace("/usage/", "/usage.csv"),
        usage_path("acme", key=str(beta_key)).replace("/usage/", "/usage.csv"),
        f"/v1/organization/usage/audio_speeches?start_time={MAR7}&account=beta",
        f"/v1/organization/usage/audio_speeches?start_time={MAR7}&api_key_ids={beta_key}",
    ):
        response = page.request.get(live_gateway + path)
        assert response.status == 403, path
        assert "7777" not in response.text()
    screenshot(page, "member-refused")


def _stream_until_stopped(url: str, raw: str, events: list[tuple[float, dict]]) -> None:
    from websockets.sync.client import connect

    with connect(url, additional_headers={"Authorization": f"Bearer {raw}"}) as ws:
        ws.send(json.dumps({"text": "Revocation test. " * 40, "format": "pcm"}))
        try:
            for message in ws:
                if isinstance(message, str):
                    events.append((time.monotonic(), json.loads(message)))
                else:
                    events.append((time.monotonic(), {"audio": len(message)}))
        except Exception as exc:  # the server closes the socket after the error
            events.append((time.monotonic(), {"closed": type(exc).__name__}))


def _connect_once(url: str, raw: str, *, request: bool = True) -> dict:
    """The first event of a socket; with ``request``, after sending one request.

    A refused key is answered at connect: a request sent before reading that answer may
    reach the server after it closed, and its TCP reset can drop the unread error event.
    """
    from websockets.sync.client import connect

    with connect(url, additional_headers={"Authorization": f"Bearer {raw}"}) as ws:
        if request:
            ws.send(json.dumps({"text": "Hello.", "format": "pcm"}))
        return json.loads(ws.recv(timeout=5))


def test_a_new_key_is_shown_once_and_revoking_it_stops_tts_within_a_second(
    live_gateway, seeded, browser_context
) -> None:
    page = sign_in(browser_context, live_gateway, "alice")
    page.goto(live_gateway + "/dashboard/acme/keys/")
    page.fill("input[name=name]", "browser-made")
    page.click("#create-key button[type=submit]")
    raw = page.inner_text("#raw-key").strip()
    assert raw.startswith("vk_test_") and len(raw) == 46
    page.click("button[data-copy-target=raw-key]")
    screenshot(page, "key-created")
    page.goto(live_gateway + "/dashboard/acme/keys/")
    assert raw not in page.content()  # shown once
    ws_url = live_gateway.replace("http://", "ws://") + "/v1/tts/ws"
    assert _connect_once(ws_url, raw)["event"] == "header"
    # An open stream, producing audio while the key is revoked in the browser.
    events: list[tuple[float, dict]] = []
    streamer = threading.Thread(
        target=_stream_until_stopped, args=(ws_url, raw, events)
    )
    streamer.start()
    deadline = time.monotonic() + 10
    while not any("audio" in e for _, e in events) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert any("audio" in e for _, e in events), events[:3]
    row = page.locator("#keys tr", has_text="browser-made")
    row.locator("a.danger").click()
    page.check("input[name=confirm]")
    with page.expect_response(lambda r: r.request.method == "POST") as posted:
        page.click("#revoke-key button[type=submit]")
    revoked_at = time.monotonic()
    assert posted.value.status == 302
    streamer.join(timeout=10)
    stop = next(t for t, e in events if e.get("error", {}).get("code") == "AUTH_FAILED")
    print(f"open stream stopped {stop - revoked_at:.3f} s after the revoke response")
    assert stop - revoked_at < 1.0
    refused = _connect_once(ws_url, raw, request=False)
    assert refused["error"]["code"] == "AUTH_FAILED"
    assert time.monotonic() - revoked_at < 1.5
    page.wait_for_load_state("networkidle")
    assert (
        page.locator("#keys tr", has_text="browser-made").get_attribute("data-status")
        == "revoked"
    )
    screenshot(page, "key-revoked")


def test_staff_see_every_account_and_openai_tooling_reads_the_usage_api(
    live_gateway, seeded, browser_context
) -> None:
    page = sign_in(browser_context, live_gateway, "staff")
    page.goto(live_gateway + f"/dashboard/all/?from={FIRST}&to={LAST}&tz=UTC")
    assert card(page, "requests") == "7"
    assert page.locator("#by-account tr", has_text="Beta").count() == 1
    screenshot(page, "staff-all-accounts")
    from openai import OpenAI

    from accounts.services.api_keys import api_key_create

    _, raw = api_key_create(
        account=seeded.a, name="script", actor=None, actor_label="t"
    )
    client = OpenAI(base_url=live_gateway + "/v1", api_key="unused", admin_api_key=raw)
    usage = client.admin.organization.usage.audio_speeches(
        start_time=int(at("2026-03-07T00:00").timestamp()),
        end_time=int(at("2026-03-10T00:00").timestamp()),
        group_by=["api_key_id"],
    )
    assert [sum(r.characters for r in b.results) for b in usage.data] == [0, 340, 300]
    transcriptions = client.admin.organization.usage.audio_transcriptions(
        start_time=int(at("2026-03-09T00:00").timestamp()), bucket_width="1h", limit=24
    )
    assert sum(r.seconds for b in transcriptions.data for r in b.results) == 7
