"""A client secret: a short-lived browser credential minted from an API key (issue 35)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models.api_keys import ApiKey
from accounts.models.choices import SecretUse


class ClientSecret(models.Model):
    """A client secret, stored as the SHA-256 of its raw value (``ek_…``) only.

    It authenticates as ``api_key`` (metered and limited as that key, dead with it), on the
    one socket of its ``use``, until ``expires_at``; ``session`` is applied at connect.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    api_key = models.ForeignKey(
        ApiKey, on_delete=models.PROTECT, related_name="client_secrets"
    )
    secret_hash = models.CharField(max_length=64, unique=True, editable=False)
    use = models.CharField(max_length=10, choices=SecretUse.choices)
    # The session configuration the minting request gave, as validated then.
    session = models.JSONField(default=dict, blank=True)
    # The only browser origin it opens from; empty: the key's rule (see accounts.auth).
    origin = models.CharField(max_length=300, blank=True)
    # The member who minted it in the playground: refused once they leave the account.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        verbose_name = "client secret"

    def __str__(self) -> str:
        return f"client secret {self.id} ({self.use})"

    @property
    def expired(self) -> bool:
        """True once ``expires_at`` has passed: it opens no more connections."""
        return self.expires_at <= timezone.now()
