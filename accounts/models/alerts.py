"""Quota alerts: an account's alert settings, and each threshold crossed once."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from accounts.models.accounts import Account
from accounts.models.choices import QuotaMetric


def default_alert_thresholds() -> list[int]:
    """Percentages of each monthly quota at which an alert fires."""
    return [80, 95, 100]


def validate_thresholds(value: object) -> None:
    """A non-empty list of distinct integer percentages in 1–1000."""
    if (
        not isinstance(value, list)
        or not value
        or len(set(value)) != len(value)
        or not all(isinstance(v, int) and 1 <= v <= 1000 for v in value)
    ):
        raise ValidationError(
            "Enter distinct whole percentages between 1 and 1000.",
            code="invalid_thresholds",
        )


class QuotaAlertSettings(models.Model):
    """Where and when an account hears that its monthly quota runs low."""

    account = models.OneToOneField(
        Account, on_delete=models.PROTECT, related_name="alert_settings"
    )
    thresholds = models.JSONField(
        default=default_alert_thresholds, validators=[validate_thresholds]
    )
    email_enabled = models.BooleanField("send email", default=True)
    emails = models.JSONField(
        default=list, blank=True, help_text="Empty: every member with an email."
    )
    webhook_url = models.URLField("webhook URL", max_length=500, blank=True)
    # The signing secret (accounts.services.webhooks): shown once when made, never again;
    # HMAC needs it itself, so it is stored as it is, like a Stripe endpoint's secret.
    webhook_secret = models.CharField(max_length=64, blank=True, editable=False)
    # The secret before the last rotation signs too until this moment, so receivers can
    # switch over without dropping deliveries.
    previous_webhook_secret = models.CharField(
        max_length=64, blank=True, editable=False
    )
    previous_secret_expires_at = models.DateTimeField(
        null=True, blank=True, editable=False
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "quota alert settings"

    def __str__(self) -> str:
        return f"alerts of account {self.account_id}"

    @property
    def secret_hint(self) -> str:
        """The secret as people may see it again: its start and its last 4 characters."""
        if not self.webhook_secret:
            return ""
        return f"{self.webhook_secret[:6]}\u2026{self.webhook_secret[-4:]}"


class QuotaAlert(models.Model):
    """One threshold crossed by one account's metric in one period: fired once."""

    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+")
    period = models.CharField(max_length=7)
    metric = models.CharField(max_length=20, choices=QuotaMetric.choices)
    threshold = models.PositiveSmallIntegerField()
    used = models.BigIntegerField()
    limit = models.BigIntegerField()
    fired_at = models.DateTimeField(default=timezone.now)
    email_sent_at = models.DateTimeField(null=True, blank=True)
    webhook_sent_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["account", "period", "metric", "threshold"],
                name="acct_quota_alert_once",
            )
        ]

    def __str__(self) -> str:
        return f"{self.account_id} {self.period} {self.metric} {self.threshold}%"
