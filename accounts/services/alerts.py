"""Quota alerts: each threshold of each monthly quota fires once per period.

``quota_alerts_check`` runs from the periodic jobs (Celery beat, or the embedded
scheduler). It compares QuotaCounter (the authority, Q3) with each metric's effective limit
(the plan's or the account's override, plus top-ups) and inserts one QuotaAlert per crossed
threshold; the unique constraint on (account, period, metric, threshold) makes a second
run, or a concurrent one, insert nothing, so an alert fires once. Delivery follows: email
through Django's email backend, retried on later runs at most ``MAX_DELIVERY_ATTEMPTS``
times, and a signed webhook delivery (``accounts.services.webhooks``), which retries itself.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models.accounts import Account
from accounts.models.alerts import QuotaAlert, QuotaAlertSettings
from accounts.models.choices import (
    QUOTA_UNITS,
    AuditAction,
    QuotaMetric,
    operator_units,
)
from accounts.models.quota import QuotaCounter
from accounts.selectors.quota import effective_limits
from accounts.services.audit import apply_changes, audit_log_write
from accounts.services.quota import period_of
from accounts.services.webhooks import secret_set, webhook_enqueue

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

MAX_DELIVERY_ATTEMPTS = 5
SETTINGS_FIELDS = ("thresholds", "emails", "email_enabled", "webhook_url")
ALERT_EVENT = "quota.threshold_reached"


def alert_settings_update(
    *,
    account: Account,
    actor: User | None,
    actor_label: str,
    fields: Mapping[str, object],
) -> tuple[QuotaAlertSettings, str | None]:
    """Save an account's alert settings and audit the change once (``alerts.changed``).

    A webhook URL set while the account has no signing secret gets one, in the same entry
    (as its hint); it is returned, the only time it is shown, else None.
    """
    assert set(fields) <= set(SETTINGS_FIELDS), sorted(
        set(fields) - set(SETTINGS_FIELDS)
    )
    new_secret = None
    with transaction.atomic():
        current, _ = QuotaAlertSettings.objects.select_for_update().get_or_create(
            account=account
        )
        changes = apply_changes(current, fields)
        if current.webhook_url and not current.webhook_secret:
            changes["secret_hint"] = (None, secret_set(current, timezone.now())[1])
            new_secret = current.webhook_secret
        if changes:
            current.updated_at = timezone.now()
            saved = [name for name in changes if name != "secret_hint"]
            if new_secret is not None:
                saved.append("webhook_secret")
            current.save(update_fields=[*saved, "updated_at"])
            audit_log_write(
                actor=actor,
                actor_label=actor_label,
                action=AuditAction.ALERTS_CHANGED,
                account=account,
                object_type="quota_alert_settings",
                object_id=str(current.pk),
                object_name=f"alerts of {account.name}",
                changes=changes,
            )
    return current, new_secret


def _config(account: Account) -> QuotaAlertSettings:
    """The account's settings (joined by the caller's query), or the defaults."""
    try:
        return account.alert_settings
    except QuotaAlertSettings.DoesNotExist:
        return QuotaAlertSettings(account=account)


def crossed(used: int, limit: int, thresholds: list[int]) -> list[int]:
    """The thresholds (percent) that ``used`` has reached out of ``limit``."""
    return [t for t in thresholds if limit > 0 and used * 100 >= limit * t]


def quota_alerts_fire(*, now: datetime) -> int:
    """Insert an alert for every newly crossed threshold of this period; return how many."""
    period = period_of(now)
    limited = (
        Q(plan__monthly_tts_characters__isnull=False)
        | Q(plan__monthly_asr_seconds__isnull=False)
        | Q(quota_overrides__kind="limit", quota_overrides__amount__isnull=False)
    )
    accounts = list(
        Account.objects.filter(limited, is_active=True)
        .distinct()
        .select_related("plan", "alert_settings")
    )
    used = {
        (c.account_id, c.metric): c.used
        for c in QuotaCounter.objects.filter(
            period=period, account__in=[a.pk for a in accounts]
        )
    }
    new = []
    for account in accounts:
        thresholds = _config(account).thresholds
        for metric, effective in effective_limits(account=account, now=now).items():
            if effective.limit is None:
                continue
            value = used.get((account.pk, metric), 0)
            for threshold in crossed(value, effective.limit, thresholds):
                new.append(
                    QuotaAlert(
                        account=account,
                        period=period,
                        metric=metric,
                        threshold=threshold,
                        used=value,
                        limit=effective.limit,
                        fired_at=now,
                    )
                )
    if not new:
        return 0
    before = QuotaAlert.objects.filter(period=period).count()
    QuotaAlert.objects.bulk_create(new, ignore_conflicts=True)
    fired = QuotaAlert.objects.filter(period=period).count() - before
    if fired:
        logger.info("quota alerts: %d fired for %s", fired, period)
    return fired


def _recipients(account: Account, config: QuotaAlertSettings) -> list[str]:
    if not config.email_enabled:
        return []
    if config.emails:
        return list(config.emails)
    return sorted(
        {email for email in account.members.values_list("email", flat=True) if email}
    )


def alert_data(alert: QuotaAlert) -> dict[str, object]:
    """The ``data`` of an alert's webhook event, in the metric's unit (characters, ms)."""
    return {
        "period": alert.period,
        "metric": alert.metric,
        "unit": "characters" if alert.metric == QuotaMetric.TTS_CHARACTERS else "ms",
        "threshold_percent": alert.threshold,
        "used": alert.used,
        "limit": alert.limit,
        "fired_at": alert.fired_at.isoformat(),
    }


def _send_email(alert: QuotaAlert, to: list[str]) -> None:
    metric = alert.get_metric_display()
    unit = QUOTA_UNITS[alert.metric][0]
    used = operator_units(alert.metric, alert.used)
    limit = operator_units(alert.metric, alert.limit)
    send_mail(
        subject=f"[veena] {alert.account.name}: {alert.threshold}% of the monthly "
        f"{metric} quota used",
        message=(
            f"Account {alert.account.name} has used {used:,} of {limit:,} {unit} of "
            f"its {metric} quota for {alert.period} ({alert.threshold}% threshold), "
            f"as of {alert.fired_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC."
        ),
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=to,
    )


def _email(alert: QuotaAlert, to: list[str], now: datetime) -> bool:
    """One email attempt; True when sent."""
    try:
        _send_email(alert, to)
    except Exception as exc:  # boundary: one delivery; retried on the next run
        logger.exception("quota alert %s: email failed", alert.pk)
        alert.last_error = f"email: {type(exc).__name__}"[:200]
        sent = False
    else:
        alert.email_sent_at, alert.last_error = now, ""
        sent = True
    alert.attempts += 1
    alert.save(update_fields=["email_sent_at", "attempts", "last_error"])
    return sent


def quota_alerts_deliver(*, now: datetime) -> int:
    """Email every unsent alert (within its attempts) and hand each alert not yet given to
    the webhook to it; return how many emails and webhook events went out."""
    done = 0
    pending = QuotaAlert.objects.filter(
        email_sent_at__isnull=True, attempts__lt=MAX_DELIVERY_ATTEMPTS
    ).select_related("account__alert_settings")
    for alert in pending:
        to = _recipients(alert.account, _config(alert.account))
        if to:
            done += _email(alert, to, now)
    unsent = QuotaAlert.objects.filter(
        period=period_of(now), webhook_sent_at__isnull=True, deliveries__isnull=True
    ).exclude(account__alert_settings__webhook_url="")
    for alert in unsent.filter(account__alert_settings__isnull=False).select_related(
        "account__alert_settings"
    ):
        webhook_enqueue(
            account=alert.account,
            url=alert.account.alert_settings.webhook_url,
            event_type=ALERT_EVENT,
            data=alert_data(alert),
            alert=alert,
            now=now,
        )
        done += 1
    return done


def quota_alerts_check(*, now: datetime | None = None) -> int:
    """Fire newly crossed thresholds, then deliver what is pending; return alerts fired."""
    moment = now or timezone.now()
    fired = quota_alerts_fire(now=moment)
    quota_alerts_deliver(now=moment)
    return fired
