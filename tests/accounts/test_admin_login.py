"""Admin login attempts are throttled (issue 9 item 9; accounts.login_throttle)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from accounts.login_throttle import THROTTLED

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def fresh_cache() -> Any:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def operator() -> User:
    return User.objects.create_superuser("operator", "op@example.com", PASSWORD)


def log_in(client: Client, username: str, password: str, address: str) -> Any:
    return client.post(
        "/admin/login/?next=/admin/",
        {"username": username, "password": password},
        REMOTE_ADDR=address,
    )


def test_failed_logins_lock_the_username_even_for_the_right_password(
    operator: User, settings: Any
) -> None:
    settings.ADMIN_LOGIN_MAX_FAILURES = 5
    client = Client()
    for _ in range(5):
        response = log_in(client, "operator", "guess", "10.0.0.1")
        assert response.status_code == 200 and THROTTLED not in response.text
    refused = log_in(client, "operator", PASSWORD, "10.0.0.2")  # another address
    assert refused.status_code == 200 and THROTTLED in refused.text
    assert "_auth_user_id" not in client.session


def test_one_address_spraying_usernames_is_locked_out(
    operator: User, settings: Any
) -> None:
    settings.ADMIN_LOGIN_MAX_FAILURES_PER_IP = 3
    client = Client()
    for n in range(3):
        log_in(client, f"user{n}", "guess", "10.0.0.9")
    assert THROTTLED in log_in(client, "operator", PASSWORD, "10.0.0.9").text
    other = log_in(Client(), "operator", PASSWORD, "10.0.0.10")
    assert other.status_code == 302  # another address is not affected


def test_a_good_login_under_the_limit_works(operator: User) -> None:
    client = Client()
    log_in(client, "operator", "guess", "10.0.0.1")
    response = log_in(client, "operator", PASSWORD, "10.0.0.1")
    assert response.status_code == 302 and response["Location"] == "/admin/"


def test_the_dashboard_sign_in_counts_against_the_same_limits(
    operator: User, settings: Any
) -> None:
    settings.ADMIN_LOGIN_MAX_FAILURES = 3
    client = Client()
    for _ in range(2):
        wrong = client.post(
            "/dashboard/login/",
            {"username": "operator", "password": "guess"},
            REMOTE_ADDR="10.0.1.1",
        )
        assert (
            wrong.status_code == 200 and "correct username and password" in wrong.text
        )
    log_in(client, "operator", "guess", "10.0.1.1")  # the third failure, on the admin
    refused = client.post(
        "/dashboard/login/",
        {"username": "operator", "password": PASSWORD},
        REMOTE_ADDR="10.0.1.2",
    )
    assert refused.status_code == 200 and THROTTLED in refused.text
    assert "_auth_user_id" not in client.session
