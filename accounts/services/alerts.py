"""Quota alerts: each threshold of each monthly quota fires once per period.

``quota_alerts_check`` runs from the periodic jobs (Celery beat, or the embedded
scheduler). It compares QuotaCounter (the authority, Q3) with each limited metric's
thresholds and inserts one QuotaAlert per crossed threshold; the unique constraint on
(account, period, metric, threshold) makes a second run, or a concurrent one, insert
nothing, so an alert fires once. Delivery follows the commit: email through Django's
email backend and/or a JSON POST to the account's webhook. A failed delivery is retried
on later runs, at most ``MAX_DELIVERY_ATTEMPTS`` times.
"""

from __future__ import annotations

import json
import logging
import urllib.request
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
from accounts.models.choices import AuditAction, QuotaMetric
from accounts.models.quota import QuotaCounter
from accounts.selectors.quota import plan_limits
from accounts.services.audit import apply_changes, audit_log_write
from accounts.services.quota import period_of

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

MAX_DELIVERY_ATTEMPTS = 5
WEBHOOK_TIMEOUT_S = 5.0
SETTINGS_FIELDS = ("thresholds", "emails", "email_enabled", "webhook_url")
UNITS = {QuotaMetric.TTS_CHARACTERS: "characters", QuotaMetric.ASR_AUDIO_MS: "ms"}


def alert_settings_update(
    *,
    account: Account,
    actor: User | None,
    actor_label: str,
    fields: Mapping[str, object],
) -> QuotaAlertSettings:
    """Save an account's alert settings and audit the change (``alerts.changed``)."""
    assert set(fields) <= set(SETTINGS_FIELDS), sorted(
        set(fields) - set(SETTINGS_FIELDS)
    )
    with transaction.atomic():
        current, _ = QuotaAlertSettings.objects.select_for_update().get_or_create(
            account=account
        )
        changes = apply_changes(current, fields)
        if changes:
            current.updated_at = timezone.now()
            current.save(update_fields=[*changes, "updated_at"])
            audit_log_write(
                actor=actor,
                actor_label=actor_label,
                action=AuditAction.ALERTS_CHANGED,
                account=account,
                object_type="quota_alert_settings",
                object_id=str(current.pk),
                changes=changes,
            )
    return current


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
    accounts = list(
        Account.objects.filter(is_active=True)
        .filter(
            Q(plan__monthly_tts_characters__isnull=False)
            | Q(plan__monthly_asr_seconds__isnull=False)
        )
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
        for metric, limit in plan_limits(account).items():
            value = used.get((account.pk, metric), 0)
            for threshold in crossed(value, limit, thresholds):
                new.append(
                    QuotaAlert(
                        account=account,
                        period=period,
                        metric=metric,
                        threshold=threshold,
                        used=value,
                        limit=limit,
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


def alert_payload(alert: QuotaAlert) -> dict[str, object]:
    """The webhook body of one alert."""
    return {
        "type": "quota.threshold_reached",
        "account": alert.account.slug,
        "period": alert.period,
        "metric": alert.metric,
        "unit": UNITS[QuotaMetric(alert.metric)],
        "threshold_percent": alert.threshold,
        "used": alert.used,
        "limit": alert.limit,
        "fired_at": alert.fired_at.isoformat(),
    }


def _send_email(alert: QuotaAlert, to: list[str]) -> None:
    metric = (
        "TTS characters" if alert.metric == QuotaMetric.TTS_CHARACTERS else "ASR audio"
    )
    send_mail(
        subject=f"[veena] {alert.account.name}: {alert.threshold}% of the monthly "
        f"{metric} quota used",
        message=(
            f"Account {alert.account.name} has used {alert.used:,} of {alert.limit:,} "
            f"{UNITS[QuotaMetric(alert.metric)]} of its {metric} quota for "
            f"{alert.period} ({alert.threshold}% threshold), as of "
            f"{alert.fired_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC."
        ),
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=to,
    )


def _post_webhook(url: str, alert: QuotaAlert) -> None:
    request = urllib.request.Request(
        url,
        data=json.dumps(alert_payload(alert)).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "veena-gateway"},
        method="POST",
    )
    # urlopen raises HTTPError for any status outside 2xx/3xx.
    with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT_S):
        pass


def _deliver(alert: QuotaAlert, now: datetime) -> list[str]:
    config = _config(alert.account)
    done: list[str] = []
    errors: list[str] = []
    to = _recipients(alert.account, config)
    if alert.email_sent_at is None and to:
        try:
            _send_email(alert, to)
            alert.email_sent_at = now
            done.append("email_sent_at")
        except Exception as exc:  # boundary: one delivery; retried on the next run
            logger.exception("quota alert %s: email failed", alert.pk)
            errors.append(f"email: {type(exc).__name__}")
    if alert.webhook_sent_at is None and config.webhook_url:
        try:
            _post_webhook(config.webhook_url, alert)
            alert.webhook_sent_at = now
            done.append("webhook_sent_at")
        except Exception as exc:  # boundary: one delivery; retried on the next run
            logger.warning(
                "quota alert %s: webhook failed (%s)", alert.pk, type(exc).__name__
            )
            errors.append(f"webhook: {type(exc).__name__}")
    alert.attempts += 1
    alert.last_error = "; ".join(errors)[:200]
    alert.save(update_fields=[*done, "attempts", "last_error"])
    return done


def quota_alerts_deliver(*, now: datetime) -> int:
    """Send every undelivered alert (within its attempts); return deliveries made."""
    pending = QuotaAlert.objects.filter(
        Q(email_sent_at__isnull=True) | Q(webhook_sent_at__isnull=True),
        attempts__lt=MAX_DELIVERY_ATTEMPTS,
    ).select_related("account__alert_settings")
    delivered = 0
    for alert in pending:
        config = _config(alert.account)
        wants_email = alert.email_sent_at is None and bool(
            _recipients(alert.account, config)
        )
        wants_hook = alert.webhook_sent_at is None and bool(config.webhook_url)
        if wants_email or wants_hook:
            delivered += len(_deliver(alert, now))
    return delivered


def quota_alerts_check(*, now: datetime | None = None) -> int:
    """Fire newly crossed thresholds, then deliver what is pending; return alerts fired."""
    moment = now or timezone.now()
    fired = quota_alerts_fire(now=moment)
    quota_alerts_deliver(now=moment)
    return fired
