"""Dashboard and usage-API reads: who may see what (this module), then what they see.

``dashboard_account_for`` is the one chokepoint (STYLE 9) through which every dashboard
page, CSV, JSON call and key action of a signed-in person resolves its account. Staff get
any account; a member gets the accounts they belong to; anyone else gets 403, for an
account that exists and for one that does not alike, so the answer reveals nothing. Every
later read takes the resolved scope (STYLE 39), and a filter that names a key of another
account is refused with 403 rather than dropped.

The submodules read what a scope may see: ``usage`` (the usage page, from rollups:
which rows in ``sources``, their buckets in ``bucketing``, their sums in ``measures``),
``export`` (the CSV), ``records`` (the recent requests table), ``quota`` (quota bars and
forecasts) and ``openai_usage`` (the usage API).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from accounts.models.accounts import Account
from accounts.models.api_keys import ApiKey

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

    AnyUser = AbstractBaseUser | AnonymousUser


@dataclass(frozen=True)
class Scope:
    """What one request may read: one account, or every account (staff only)."""

    account: Account | None

    @property
    def is_global(self) -> bool:
        """True for the staff view over every account."""
        return self.account is None

    def accounts(self) -> QuerySet[Account]:
        """The accounts in scope."""
        if self.account is None:
            return Account.objects.all()
        return Account.objects.filter(pk=self.account.pk)


def _is_staff(user: AnyUser) -> bool:
    return bool(user.is_authenticated and getattr(user, "is_staff", False))


def dashboard_account_for(*, user: AnyUser, slug: str) -> Account:
    """The account ``slug`` if ``user`` may see it (accounts D2; 403 otherwise)."""
    if not user.is_authenticated:
        raise PermissionDenied
    account = Account.objects.select_related("plan").filter(slug=slug).first()
    if _is_staff(user):
        if account is None:
            raise Http404
        return account
    if account is None or not account.members.filter(pk=user.pk).exists():
        raise PermissionDenied
    return account


def playground_accounts_for(*, user: AnyUser) -> QuerySet[Account]:
    """The accounts whose quota ``user`` may spend in the playground: their own, active.

    Members only, staff included: the playground meters to the account, so staff use it
    on an account they belong to, not on any account they can see.
    """
    if not user.is_authenticated or not user.is_active:
        return Account.objects.none()
    return (
        Account.objects.select_related("plan")
        .filter(members=user.pk, is_active=True)
        .order_by("name")
    )


def playground_account_for(*, user: AnyUser, slug: str) -> Account:
    """The account ``slug`` if ``user`` may use its playground (403 otherwise)."""
    account = playground_accounts_for(user=user).filter(slug=slug).first()
    if account is None:
        raise PermissionDenied
    return account


def playground_member_is_active(*, account_id: int, user_id: int) -> bool:
    """Whether a token's member still belongs to the account (checked at each connect)."""
    return Account.objects.filter(
        pk=account_id, members__pk=user_id, members__is_active=True
    ).exists()


def dashboard_accounts_for(*, user: AnyUser) -> QuerySet[Account]:
    """Every account ``user`` may open: all for staff, their own for members."""
    if not user.is_authenticated:
        return Account.objects.none()
    accounts = Account.objects.select_related("plan").order_by("name")
    return accounts if _is_staff(user) else accounts.filter(members=user.pk)


def dashboard_global_scope_for(*, user: AnyUser) -> Scope:
    """The every-account scope of the staff view (``all/``); 403 for anyone else."""
    if not _is_staff(user):
        raise PermissionDenied
    return Scope(account=None)


def scope_keys(*, scope: Scope, key_ids: Iterable[uuid.UUID]) -> list[ApiKey]:
    """The keys ``key_ids`` of the scope; 403 if any of them is not in it."""
    wanted = set(key_ids)
    if not wanted:
        return []
    keys = ApiKey.objects.filter(pk__in=wanted)
    if scope.account is not None:
        keys = keys.filter(account=scope.account)
    found = list(keys)
    if len(found) != len(wanted):
        raise PermissionDenied
    return found


def account_key(*, account: Account, key_id: uuid.UUID) -> ApiKey:
    """One key of ``account`` for a key action; 403 when it belongs elsewhere."""
    key = ApiKey.objects.filter(pk=key_id, account=account).first()
    if key is None:
        raise PermissionDenied
    return key


def account_keys(*, account: Account) -> QuerySet[ApiKey]:
    """The account's keys, newest first."""
    return ApiKey.objects.filter(account=account).order_by("-created_at")
