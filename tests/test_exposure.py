"""Issue 31 item 5: operational detail only for operators in production, and a
Content-Security-Policy on every HTML page (dashboard, playground, admin)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from gateway.server.csp import HEADER, POLICY

pytestmark = pytest.mark.django_db

TOKEN = "ops-token-of-this-test"


@pytest.fixture
def production(settings: Any) -> Any:
    settings.PRODUCTION = True
    settings.OPS_TOKEN = TOKEN
    return settings


def test_metrics_are_open_outside_production(client: Client) -> None:
    assert client.get("/metrics").status_code == 200
    body = client.get("/readyz").json()
    assert {"database", "channel_layer", "workers", "topology"} <= set(body)


@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x"]
)
def test_production_hides_metrics_and_readiness_detail(
    client: Client, production: Any, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    metrics = client.get("/metrics", headers=headers)
    assert metrics.status_code == 401 and b"veena_" not in metrics.content
    assert metrics["WWW-Authenticate"] == "Bearer"
    readyz = client.get("/readyz", headers=headers)
    assert set(readyz.json()) == {"ready"}, readyz.json()


def test_production_shows_them_to_the_ops_token(
    client: Client, production: Any
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    metrics = client.get("/metrics", headers=headers)
    assert metrics.status_code == 200 and b"veena_active_streams" in metrics.content
    assert "workers" in client.get("/readyz", headers=headers).json()


def test_production_without_a_token_shows_them_to_nobody(
    client: Client, production: Any
) -> None:
    production.OPS_TOKEN = ""
    assert (
        client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 401
    )
    from veena_site.checks import operators_can_read_metrics

    assert [w.id for w in operators_can_read_metrics()] == ["veena.W003"]


@pytest.mark.parametrize(
    "path", ["/dashboard/login/", "/admin/login/", "/playground/", "/dashboard/nope/"]
)
def test_html_pages_carry_the_policy(client: Client, path: str) -> None:
    response = client.get(path)
    assert response["Content-Type"].startswith("text/html"), path
    assert response[HEADER] == POLICY
    assert "script-src 'self';" in POLICY and "unsafe" not in POLICY


def test_json_responses_carry_none(client: Client) -> None:
    assert HEADER not in client.get("/healthz")
