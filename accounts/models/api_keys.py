"""An API key, stored as a hash with the display parts and its own limits."""

from __future__ import annotations

import uuid

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from accounts.models.accounts import Account, acting_user
from accounts.models.choices import KeyKind, KeyStatus
from accounts.origins import normalize_origin

REVOKED_REASON_MAX_LENGTH = 200


class ApiKey(models.Model):
    """An API key, stored as a SHA-256 hash plus a display prefix and suffix (accounts K3)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        Account, on_delete=models.PROTECT, related_name="api_keys"
    )
    name = models.CharField(max_length=100)
    key_prefix = models.CharField(max_length=16, db_index=True, editable=False)
    last4 = models.CharField(max_length=4, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    created_by = acting_user()
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_by = acting_user()
    revoked_reason = models.CharField(
        max_length=REVOKED_REASON_MAX_LENGTH, blank=True, editable=False
    )
    rpm_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Per-key requests per minute; empty: only the plan applies.",
    )
    concurrency_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Per-key concurrent streams; empty: only the plan applies.",
    )
    allowed_origins = models.JSONField(
        default=list,
        blank=True,
        help_text='Browser origins, e.g. ["https://app.example.com"]. Empty: no browser.',
    )
    version = models.PositiveIntegerField(default=1, editable=False)
    kind = models.CharField(
        max_length=10,
        choices=KeyKind.choices,
        default=KeyKind.STANDARD,
        editable=False,
    )

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.display} ({self.name})"

    @property
    def display(self) -> str:
        """The form shown to people: ``key_prefix…last4``, or ``playground``."""
        if self.kind == KeyKind.PLAYGROUND:
            return KeyKind.PLAYGROUND.value
        return f"{self.key_prefix}\u2026{self.last4}"

    @property
    def status(self) -> str:
        """``revoked``, ``expired`` or ``active``, checked in that order."""
        if self.revoked_at is not None:
            return KeyStatus.REVOKED
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return KeyStatus.EXPIRED
        return KeyStatus.ACTIVE

    def clean(self) -> None:
        """M3: key caps within the plan, origins of the form ``scheme://host[:port]``."""
        errors: dict[str, str] = {}
        origins = self.allowed_origins
        if not isinstance(origins, list) or not all(
            isinstance(o, str) for o in origins
        ):
            errors["allowed_origins"] = "Enter a list of origins."
        else:
            normalized = [normalize_origin(o) for o in origins]
            if None in normalized:
                errors["allowed_origins"] = "Each origin must be scheme://host[:port]."
            else:
                self.allowed_origins = list(dict.fromkeys(normalized))
        if self.account_id is not None:
            plan = self.account.plan
            if self.rpm_limit is not None and self.rpm_limit > plan.requests_per_minute:
                errors["rpm_limit"] = "Above the plan's requests per minute."
            if (
                self.concurrency_limit is not None
                and self.concurrency_limit > plan.max_concurrent_streams
            ):
                errors["concurrency_limit"] = "Above the plan's concurrent streams."
        if errors:
            raise ValidationError(errors)
