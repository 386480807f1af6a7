"""Key self-service for members (accounts D10): create, edit and revoke their keys.

Every action is a CSRF-protected POST that calls the K services, which write the audit
log and publish the key's new version (a revocation reaches every gateway within 1 s).
The raw key of a new key is rendered once, in the POST's own response, under
``Cache-Control: no-store``; it never enters a message, the session or a redirect (K4).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods

from accounts.exceptions import KeyAlreadyRevoked
from accounts.forms import KeyForm, RevokeForm
from accounts.models.choices import KeyKind
from accounts.selectors import account_key, account_keys, dashboard_account_for
from accounts.services.api_keys import api_key_create, api_key_revoke, api_key_update

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from accounts.models.accounts import Account
    from accounts.models.api_keys import ApiKey


def _actor(request: HttpRequest) -> User:
    return cast("User", request.user)


def _member_key(
    request: HttpRequest, slug: str, key_id: uuid.UUID
) -> tuple[Account, ApiKey]:
    """The member's account and its key ``key_id`` (403 for any other)."""
    account = dashboard_account_for(user=request.user, slug=slug)
    return account, account_key(account=account, key_id=key_id)


def _form_page(
    request: HttpRequest, template: str, context: Mapping[str, object]
) -> HttpResponse:
    """The page with its form: 200 on GET, 400 for a POST that did not go through."""
    status = 400 if request.method == "POST" else 200
    return render(request, template, context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def keys(request: HttpRequest, slug: str) -> HttpResponse:
    """``<slug>/keys/``: the account's keys, and the form that creates one."""
    account = dashboard_account_for(user=request.user, slug=slug)
    form = KeyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            api_key, raw = api_key_create(
                account=account,
                name=form.cleaned_data["name"],
                actor=_actor(request),
                actor_label=_actor(request).get_username(),
                expires_at=form.expires_at(),
                allowed_origins=form.cleaned_data["allowed_origins"],
            )
        except ValidationError as error:
            form.add_error(None, "; ".join(error.messages))
        else:
            response = render(
                request,
                "accounts/dashboard/key_created.html",
                {
                    "account": account,
                    "api_key": api_key,
                    "raw_key": raw,
                    "base_url": request.build_absolute_uri("/").rstrip("/"),
                },
            )
            add_never_cache_headers(response)  # no-store: the key is shown once
            return response
    context = {"account": account, "keys": account_keys(account=account), "form": form}
    return _form_page(request, "accounts/dashboard/keys.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def key_edit(request: HttpRequest, slug: str, key_id: uuid.UUID) -> HttpResponse:
    """``<slug>/keys/<id>/``: rename a key, change its expiry and origins (K8)."""
    account, api_key = _member_key(request, slug, key_id)
    initial = {
        "name": api_key.name,
        "expires_on": api_key.expires_at.date() if api_key.expires_at else None,
        "allowed_origins": "\n".join(api_key.allowed_origins),
    }
    form = KeyForm(request.POST or None, initial=initial)
    revoked = api_key.revoked_at is not None
    playground = api_key.kind == KeyKind.PLAYGROUND  # nothing of it is editable
    if request.method == "POST" and not (revoked or playground) and form.is_valid():
        try:
            api_key_update(
                api_key=api_key,
                actor=_actor(request),
                actor_label=_actor(request).get_username(),
                fields={
                    "name": form.cleaned_data["name"],
                    "expires_at": form.expires_at(),
                    "allowed_origins": form.cleaned_data["allowed_origins"],
                },
            )
        except ValidationError as error:
            form.add_error(None, "; ".join(error.messages))
        except KeyAlreadyRevoked:
            form.add_error(
                None, "This key was revoked meanwhile; it can no longer change."
            )
        else:
            return redirect("dashboard:keys", slug=account.slug)
    context = {
        "account": account,
        "api_key": api_key,
        "form": form,
        "revoked": revoked,
        "playground": playground,
    }
    return _form_page(request, "accounts/dashboard/key_edit.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def key_revoke(request: HttpRequest, slug: str, key_id: uuid.UUID) -> HttpResponse:
    """``<slug>/keys/<id>/revoke/``: confirm, then revoke for good (K6)."""
    account, api_key = _member_key(request, slug, key_id)
    form = RevokeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            api_key_revoke(
                api_key=api_key,
                actor=_actor(request),
                reason=form.cleaned_data["reason"] or "revoked in the dashboard",
                actor_label=_actor(request).get_username(),
            )
        except KeyAlreadyRevoked:
            pass  # the same outcome the member asked for
        return redirect("dashboard:keys", slug=account.slug)
    context = {"account": account, "api_key": api_key, "form": form}
    return _form_page(request, "accounts/dashboard/key_revoke.html", context)
