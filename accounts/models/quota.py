"""Monthly quotas: the authoritative counters (accounts Q3), operators' corrections of
them, and per-account overrides and top-ups of the plan's limits."""

from __future__ import annotations

from datetime import datetime

from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from accounts.models.accounts import Account, acting_user
from accounts.models.choices import QuotaMetric, QuotaOverrideKind

QUOTA_REASON_MAX_LENGTH = 500
AMOUNT_HELP = "Characters for TTS, seconds for ASR audio."


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


class QuotaAdjustment(models.Model):
    """An operator's correction of one quota counter, with a reason.

    It counts in ``QuotaCounter.used`` like usage does: ``used`` is the sum of the period's
    records plus the sum of its adjustments (Q3, ``recount_quota``). Append-only.
    """

    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+")
    period = models.CharField(max_length=7, help_text="YYYY-MM (UTC)")
    metric = models.CharField(max_length=20, choices=QuotaMetric.choices)
    amount = models.BigIntegerField(
        help_text=f"Added to the counter; negative to credit usage back. {AMOUNT_HELP}"
    )
    reason = models.CharField(max_length=QUOTA_REASON_MAX_LENGTH)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    created_by = acting_user()

    class Meta:
        indexes = [
            models.Index(
                fields=["account", "period", "metric"], name="acct_quota_adjust_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.period} {self.get_metric_display()} {self.amount:+,}"


class QuotaOverride(models.Model):
    """An account's own monthly limit of one metric, or a top-up on top of it.

    While it is in effect (``starts_at`` ≤ now < ``ends_at``), a ``limit`` replaces the
    plan's limit (empty ``amount``: unlimited) and a ``top_up`` adds ``amount`` to each
    month's limit. Ending one early sets ``ends_at``; rows are never deleted.
    """

    account = models.ForeignKey(
        Account, on_delete=models.PROTECT, related_name="quota_overrides"
    )
    metric = models.CharField(max_length=20, choices=QuotaMetric.choices)
    kind = models.CharField(max_length=10, choices=QuotaOverrideKind.choices)
    amount = models.BigIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text=f"{AMOUNT_HELP} An empty monthly limit means unlimited.",
    )
    starts_at = models.DateTimeField(default=timezone.now)
    ends_at = models.DateTimeField(
        null=True, blank=True, help_text="Empty: until ended."
    )
    reason = models.CharField(max_length=QUOTA_REASON_MAX_LENGTH)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    created_by = acting_user()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(kind="limit")
                | Q(amount__gt=0, amount__isnull=False, ends_at__isnull=False),
                name="acct_quota_topup_amount",
                violation_error_message="A top-up needs an amount above 0 and an end.",
            ),
            models.CheckConstraint(
                condition=Q(ends_at__isnull=True)
                | Q(ends_at__gte=models.F("starts_at")),
                name="acct_quota_override_window",
                violation_error_message="An override cannot end before it starts.",
            ),
        ]
        indexes = [
            models.Index(fields=["account", "ends_at"], name="acct_quota_override_acct")
        ]

    def __str__(self) -> str:
        amount = "unlimited" if self.amount is None else f"{self.amount:,}"
        verb = "+" if self.kind == QuotaOverrideKind.TOP_UP else "="
        return f"{self.get_metric_display()} {verb}{amount}"

    def in_effect(self, at: datetime) -> bool:
        """Whether it applies at ``at``."""
        return self.starts_at <= at and (self.ends_at is None or at < self.ends_at)
