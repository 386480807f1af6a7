"""Quota alerts of one account: thresholds, recipients, the signed webhook and its secret,
a test event, and the recent deliveries and alerts.

A new signing secret is rendered in the POST's own response, under ``no-store``, and never
again: it does not go through ``django.contrib.messages`` (accounts K4 holds for it too).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.forms import AlertSettingsForm
from accounts.models.accounts import Account
from accounts.models.choices import WebhookStatus
from accounts.selectors import dashboard_account_for
from accounts.selectors.alerts import (
    alert_settings_of,
    recent_alerts,
    recent_deliveries,
)
from accounts.services.alerts import alert_settings_update
from accounts.services.webhooks import (
    RETRY_DELAYS_S,
    webhook_secret_rotate,
    webhook_send_test,
)
from accounts.tasks import deliver_webhook
from gateway.wording import count

if TYPE_CHECKING:
    from django.contrib.auth.models import User

TEMPLATE = "accounts/dashboard/alerts.html"


def _page(
    request: HttpRequest,
    account: Account,
    form: AlertSettingsForm,
    *,
    new_secret: str | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {
        "account": account,
        "form": form,
        "settings": form.instance,
        "new_secret": new_secret,
        "deliveries": recent_deliveries(account=account),
        "alerts": recent_alerts(account=account),
    }
    response = render(request, TEMPLATE, context, status=status)
    if new_secret is not None:
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_http_methods(["GET", "POST"])
def alerts(request: HttpRequest, slug: str) -> HttpResponse:
    """``<slug>/alerts/``: view and change where quota alerts go."""
    account = dashboard_account_for(user=request.user, slug=slug)
    form = AlertSettingsForm(
        request.POST or None, instance=alert_settings_of(account=account)
    )
    if request.method != "POST":
        return _page(request, account, form)
    if not form.is_valid():
        return _page(request, account, form, status=400)
    user = cast("User", request.user)
    saved, new_secret = alert_settings_update(
        account=account,
        actor=user,
        actor_label=user.get_username(),
        fields={
            "thresholds": form.cleaned_data["thresholds_text"],
            "emails": form.cleaned_data["emails_text"],
            "email_enabled": form.cleaned_data["email_enabled"],
            "webhook_url": form.cleaned_data["webhook_url"],
        },
    )
    messages.success(request, "Alert settings saved.")
    if new_secret is None:
        return redirect("dashboard:alerts", slug=account.slug)
    return _page(
        request, account, AlertSettingsForm(instance=saved), new_secret=new_secret
    )


@login_required
@require_POST
def rotate_secret(request: HttpRequest, slug: str) -> HttpResponse:
    """``<slug>/alerts/secret/``: make a new signing secret and show it once."""
    account = dashboard_account_for(user=request.user, slug=slug)
    user = cast("User", request.user)
    secret = webhook_secret_rotate(
        account=account, actor=user, actor_label=user.get_username()
    )
    messages.success(
        request,
        "New signing secret made. The previous one signs too for 24 hours.",
    )
    form = AlertSettingsForm(instance=alert_settings_of(account=account))
    return _page(request, account, form, new_secret=secret)


@login_required
@require_POST
def send_test(request: HttpRequest, slug: str) -> HttpResponse:
    """``<slug>/alerts/test/``: send a ``webhook.test`` event and say how it went."""
    account = dashboard_account_for(user=request.user, slug=slug)
    try:
        delivery = webhook_send_test(account=account)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect("dashboard:alerts", slug=account.slug)
    # Inline in the embedded default (eager Celery), so the outcome is known below.
    transaction.on_commit(partial(deliver_webhook.delay, str(delivery.pk)))
    delivery.refresh_from_db()
    if delivery.status == WebhookStatus.DELIVERED:
        messages.success(
            request, f"Test event delivered: HTTP {delivery.last_status_code}."
        )
    elif delivery.attempts:
        wait = count(RETRY_DELAYS_S[0], "second")
        messages.error(
            request,
            f"Test event not delivered ({delivery.last_error}). "
            f"It is retried in {wait}, then with growing delays.",
        )
    else:
        messages.info(request, "Test event queued; its outcome appears below.")
    return redirect("dashboard:alerts", slug=account.slug)
