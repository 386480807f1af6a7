"""The authoritative monthly usage counters (accounts Q3)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from accounts.models.accounts import Account
from accounts.models.choices import QuotaMetric


class QuotaCounter(models.Model):
    """The authoritative monthly usage of one metric by one account (accounts Q3)."""

    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+")
    period = models.CharField(max_length=7, help_text="YYYY-MM (UTC)")
    metric = models.CharField(max_length=20, choices=QuotaMetric.choices)
    used = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["account", "period", "metric"], name="acct_quota_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.account_id} {self.period} {self.metric}={self.used}"
