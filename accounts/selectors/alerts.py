"""Quota alert reads: an account's settings (defaults when none saved), its alerts and
its webhook deliveries."""

from __future__ import annotations

from accounts.models.accounts import Account
from accounts.models.alerts import QuotaAlert, QuotaAlertSettings
from accounts.models.webhooks import WebhookDelivery


def alert_settings_of(*, account: Account) -> QuotaAlertSettings:
    """The saved settings, or unsaved defaults (80/95/100 %, email to every member)."""
    found = QuotaAlertSettings.objects.filter(account=account).first()
    return found if found is not None else QuotaAlertSettings(account=account)


def recent_alerts(*, account: Account, limit: int = 20) -> list[QuotaAlert]:
    """The account's latest fired alerts, newest first."""
    return list(
        QuotaAlert.objects.filter(account=account).order_by("-fired_at", "-id")[:limit]
    )


def recent_deliveries(*, account: Account, limit: int = 20) -> list[WebhookDelivery]:
    """The account's latest webhook deliveries, newest first."""
    return list(
        WebhookDelivery.objects.filter(account=account).order_by("-created_at")[:limit]
    )
