"""The front door at ``/``, the favicon, and the ways in and back: the admin's "View site"
and the sign-in page."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import AsyncClient, Client

from veena_site.runtime import WorkerRuntime

pytestmark = pytest.mark.django_db(transaction=True)


def status_of(html: str) -> str:
    return re.search(r'id="status" data-ready="(\w+)"', html).group(1)  # type: ignore[union-attr]


async def test_front_door_shows_the_loaded_engines(
    embedded_worker: WorkerRuntime,
) -> None:
    from gateway.liveness import get_liveness

    await get_liveness().publish(embedded_worker.status())
    response = await AsyncClient().get("/")
    html = response.content.decode()
    assert response.status_code == 200 and status_of(html) == "true"
    for kind in ("tts", "asr"):
        version = embedded_worker.status().model_versions[kind]
        assert re.search(
            rf'data-kind="{kind}">.*?{re.escape(version)}.*?1 worker<', html, re.S
        ), kind
    body = (await AsyncClient().get("/readyz")).json()
    assert body["engines"] == {
        k: [v] for k, v in embedded_worker.status().model_versions.items()
    }
    for href in ("/dashboard/login/", "/playground/", "/docs/", "/v1/models"):
        assert f'href="{href}"' in html, href
    assert "<script>" not in html and " on" + "click=" not in html  # CSP-ready


async def test_front_door_without_workers_says_not_ready() -> None:
    response = await AsyncClient().get("/")
    html = response.content.decode()
    assert response.status_code == 200 and status_of(html) == "false"
    assert html.count("no engine loaded") == 2


def test_favicon_is_an_icon() -> None:
    response = Client().get("/favicon.ico")
    assert response.status_code == 200 and response["Content-Type"] == "image/x-icon"
    assert b"".join(response.streaming_content)[:4] == b"\x00\x00\x01\x00"


def test_admin_view_site_and_sign_in_lead_to_the_front_door() -> None:
    User.objects.create_superuser("root", "root@example.com", "pw-123456")
    client = Client()
    client.login(username="root", password="pw-123456")
    admin = client.get("/admin/").content.decode()
    assert re.search(r'<a href="/">View site</a>', admin)
    login = Client().get("/dashboard/login/").content.decode()
    assert '<a href="/">' in login
    assert 'rel="icon" href="/favicon.ico"' in login
