"""The append-only audit log of every operator and member change (accounts M6)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models.accounts import Account
from accounts.models.choices import AuditAction


class AuditLog(models.Model):
    """One change to a plan, account, membership, key, quota, alert or webhook (M6)."""

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    actor_label = models.CharField(max_length=150)
    action = models.CharField(max_length=32, choices=AuditAction.choices)
    account = models.ForeignKey(
        Account, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    object_type = models.CharField(max_length=50)
    object_id = models.CharField(max_length=64)
    # What the object was called when it changed: a key's display form and name, a plan's
    # or account's name. Kept, so the entry still reads when the object is renamed.
    object_name = models.CharField(max_length=200, blank=True)
    changes = models.JSONField(default=dict, blank=True)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["account", "at"], name="acct_audit_account_at")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.action} {self.object_type}:{self.object_id}"
