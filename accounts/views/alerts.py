"""Quota alert settings of one account: thresholds, recipients, webhook, recent alerts."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.forms import AlertSettingsForm
from accounts.selectors import dashboard_account_for
from accounts.selectors.alerts import alert_settings_of, recent_alerts
from accounts.services.alerts import alert_settings_update

if TYPE_CHECKING:
    from django.contrib.auth.models import User


@login_required
@require_http_methods(["GET", "POST"])
def alerts(request: HttpRequest, slug: str) -> HttpResponse:
    """``<slug>/alerts/``: view and change where quota alerts go."""
    account = dashboard_account_for(user=request.user, slug=slug)
    current = alert_settings_of(account=account)
    form = AlertSettingsForm(request.POST or None, instance=current)
    if request.method == "POST" and form.is_valid():
        user = cast("User", request.user)
        alert_settings_update(
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
        return redirect("dashboard:alerts", slug=account.slug)
    context = {
        "account": account,
        "form": form,
        "alerts": recent_alerts(account=account),
    }
    status = 400 if request.method == "POST" else 200
    return render(request, "accounts/dashboard/alerts.html", context, status=status)
