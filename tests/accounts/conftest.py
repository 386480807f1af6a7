"""Fixtures for the accounts tests: plans, accounts and keys made through the services."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from accounts.models import Account, ApiKey, Plan
from accounts.services.accounts import account_get_or_create, plan_get_or_create_default
from accounts.services.api_keys import api_key_create

MakeKey = Callable[..., tuple[ApiKey, str]]


@pytest.fixture
def plan(db: None) -> Plan:
    return plan_get_or_create_default()


@pytest.fixture
def account(plan: Plan) -> Account:
    return account_get_or_create(name="Acme", plan=None)


@pytest.fixture
def make_key(account: Account) -> MakeKey:
    """Create a key through the service; returns ``(api_key, raw)``."""

    def make(**kwargs: Any) -> tuple[ApiKey, str]:
        kwargs.setdefault("account", account)
        kwargs.setdefault("name", "test key")
        kwargs.setdefault("actor", None)
        kwargs.setdefault("actor_label", "pytest")
        return api_key_create(**kwargs)

    return make


def dump_database() -> str:
    """Every row of every table, as text, to search for secrets (accounts S1)."""
    chunks = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            chunks.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(chunks)
