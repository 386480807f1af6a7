"""Management commands (accounts T4, T5, K4, K6)."""

from __future__ import annotations

import logging
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from accounts.auth import authenticate_http
from accounts.exceptions import AdmissionDenied
from accounts.keys import hash_key
from accounts.models.accounts import Account
from accounts.models.api_keys import ApiKey
from accounts.models.audit import AuditLog
from accounts.models.plans import Plan

from .conftest import dump_database

pytestmark = pytest.mark.django_db

KEY_RE = re.compile(r"vk_test_[0-9A-Za-z]{38}")


def run(name: str, *args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(name, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_t5_create_api_key_prints_key_last_and_it_authenticates(rf, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    out, err = run("create_api_key", "--account", "Acme Corp", "--name", "ci")
    assert out.endswith("\n") and not out.endswith("\n\n")
    raw = out.splitlines()[-1]
    assert KEY_RE.fullmatch(raw)
    assert out.count(raw) == 1 and raw not in err
    api_key = ApiKey.objects.get(key_hash=hash_key(raw))
    assert str(api_key.id) in out and api_key.display in out
    assert (api_key.name, api_key.account.slug, api_key.account.plan.name) == (
        "ci",
        "acme-corp",
        "default",
    )
    assert raw not in dump_database()
    assert all(raw not in record.getMessage() for record in caplog.records)
    entry = AuditLog.objects.get(action="key.created")
    assert entry.actor_label == "manage.py create_api_key"
    principal = authenticate_http(rf.get("/", HTTP_X_API_KEY=raw), endpoint="tts")
    assert principal.key_id == api_key.id


def test_t4_create_api_key_options() -> None:
    Plan.objects.create(
        name="pro",
        requests_per_minute=100,
        max_concurrent_streams=4,
        max_session_seconds=600,
    )
    out, _ = run(
        "create_api_key",
        "--account=Beta",
        "--plan=pro",
        "--expires-in-days=3",
        "--origin=https://App.example.com",
        "--rpm=10",
        "--concurrency=2",
    )
    api_key = ApiKey.objects.get(key_hash=hash_key(out.splitlines()[-1]))
    assert api_key.account.plan.name == "pro"
    assert api_key.name == "default"
    assert api_key.allowed_origins == ["https://app.example.com"]
    assert (api_key.rpm_limit, api_key.concurrency_limit) == (10, 2)
    assert api_key.expires_at is not None


def test_t4_existing_account_gets_another_key() -> None:
    run("create_api_key", "--account", "Acme")
    run("create_api_key", "--account", "acme")
    assert Account.objects.count() == 1
    assert ApiKey.objects.count() == 2


@pytest.mark.parametrize(
    "args",
    [
        ["--account", "Acme", "--plan", "missing"],
        ["--account", "Acme", "--rpm", "100000"],
        ["--account", "Acme", "--origin", "not-an-origin"],
        ["--account", "Acme", "--expires-in-days", "0"],
    ],
)
def test_t4_create_api_key_errors_create_nothing(args) -> None:
    with pytest.raises(CommandError):
        run("create_api_key", *args)
    assert not ApiKey.objects.exists()
    assert not Account.objects.exists()


def test_t4_different_plan_for_existing_account_is_an_error() -> None:
    run("create_api_key", "--account", "Acme")
    Plan.objects.create(
        name="pro",
        requests_per_minute=100,
        max_concurrent_streams=4,
        max_session_seconds=600,
    )
    with pytest.raises(CommandError):
        run("create_api_key", "--account", "Acme", "--plan", "pro")
    assert ApiKey.objects.count() == 1


@pytest.mark.parametrize("form", ["positional", "option"])
def test_k6_revoke_api_key_command(rf, form) -> None:
    raw = run("create_api_key", "--account", "Acme")[0].splitlines()[-1]
    api_key = ApiKey.objects.get(key_hash=hash_key(raw))
    key_args = (
        [str(api_key.id)] if form == "positional" else ["--key-id", str(api_key.id)]
    )
    out, _ = run("revoke_api_key", *key_args, "--reason", "rotated")
    assert str(api_key.id) in out and raw not in out
    api_key.refresh_from_db()
    assert (api_key.status, api_key.revoked_reason, api_key.version) == (
        "revoked",
        "rotated",
        2,
    )
    assert (
        AuditLog.objects.get(action="key.revoked").actor_label
        == "manage.py revoke_api_key"
    )
    with pytest.raises(AdmissionDenied):
        authenticate_http(rf.get("/", HTTP_X_API_KEY=raw), endpoint="tts")
    with pytest.raises(CommandError, match="already revoked"):
        run("revoke_api_key", *key_args, "--reason", "again")


@pytest.mark.parametrize(
    "key_id", ["not-a-uuid", "00000000-0000-4000-8000-000000000000"]
)
def test_revoke_api_key_unknown_id(key_id) -> None:
    with pytest.raises(CommandError):
        run("revoke_api_key", key_id, "--reason", "x")
