"""A dashboard user who is a member of one account, for the browser tests that sign in."""

from __future__ import annotations

from typing import Any


def account_member(
    username: str, password: str, account: str = "acme"
) -> tuple[Any, Any]:
    """Create ``username`` as a member of ``account`` (on the default plan)."""
    from django.contrib.auth.models import User

    from accounts.services.accounts import (
        account_get_or_create,
        plan_get_or_create_default,
    )

    user = User.objects.create_user(username, password=password)
    found = account_get_or_create(name=account, plan=plan_get_or_create_default())
    found.members.add(user)
    return user, found
