"""Webhook deliveries: one signed event to one account's URL, attempted until it lands."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from accounts.models.accounts import Account
from accounts.models.alerts import QuotaAlert
from accounts.models.choices import WebhookStatus


class WebhookDelivery(models.Model):
    """One event POSTed to an account's webhook, with every attempt's outcome.

    The body is fixed when the event is made, so each retry sends the same bytes (and the
    same ``id``, for the receiver to drop repeats); the signature is made anew per attempt.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+")
    alert = models.ForeignKey(
        QuotaAlert,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="deliveries",
    )
    event_type = models.CharField(max_length=50)
    url = models.URLField(max_length=500)
    body = models.TextField()
    status = models.CharField(
        max_length=10, choices=WebhookStatus.choices, default=WebhookStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    # The receiver's HTTP status of the last attempt; empty when none came back.
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=200, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "webhook deliveries"
        indexes = [
            models.Index(fields=["account", "created_at"], name="acct_webhook_account"),
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status="pending"),
                name="acct_webhook_due",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.id} {self.status}"
