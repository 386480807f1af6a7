"""A customer account: its members, its plan, whether it is active."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models.plans import Plan


def acting_user() -> models.ForeignKey:  # type: ignore[type-arg]
    """Who did something to a row (created it, revoked it); null once the user is gone."""
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )


class Account(models.Model):
    """A customer: owns API keys and usage, and is on one plan."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=200, unique=True)
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="accounts")
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="veena_accounts"
    )
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    def __str__(self) -> str:
        return self.name
