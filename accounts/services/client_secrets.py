"""Client secret writes: mint one from a live key, purge expired ones (issue 35).

Minting writes one row holding the secret's hash, never its raw value; the raw value is
returned once. A secret is only as good as its key: ``accounts.auth`` checks the key again
at every connect, so revoking the key (or deactivating its account) refuses every secret
minted from it at once, in every process.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from accounts.client_secrets import generate_secret
from accounts.keys import hash_key
from accounts.models.choices import SecretUse
from accounts.models.client_secrets import ClientSecret

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

# Expired secrets are kept this long (for the admin and support), then deleted.
KEEP_EXPIRED = timedelta(days=1)


@dataclass(frozen=True)
class MintedSecret:
    """A new secret's raw value (shown once) and when it stops opening connections."""

    value: str = field(repr=False)
    secret_id: uuid.UUID
    expires_at: datetime

    @property
    def expires_at_seconds(self) -> int:
        """``expires_at`` in seconds since the epoch, as OpenAI's response carries it."""
        return int(self.expires_at.timestamp())


def client_secret_create(
    *,
    api_key_id: uuid.UUID,
    use: SecretUse,
    ttl_seconds: int,
    session: dict[str, Any] | None = None,
    origin: str = "",
    created_by: User | None = None,
    now: datetime | None = None,
) -> MintedSecret:
    """Mint a secret for ``use`` from the key ``api_key_id`` (already authenticated)."""
    raw = generate_secret()
    created = now or timezone.now()
    secret = ClientSecret.objects.create(
        api_key_id=api_key_id,
        secret_hash=hash_key(raw),
        use=use,
        session=session or {},
        origin=origin,
        created_by=created_by,
        created_at=created,
        expires_at=created + timedelta(seconds=ttl_seconds),
    )
    logger.info(
        "client secret %s (%s, %d s) minted from api key %s",
        secret.id,
        use,
        ttl_seconds,
        api_key_id,
    )
    return MintedSecret(raw, secret.id, secret.expires_at)


def client_secrets_purge(*, now: datetime | None = None) -> int:
    """Delete secrets expired more than ``KEEP_EXPIRED`` ago; the count deleted."""
    before = (now or timezone.now()) - KEEP_EXPIRED
    deleted, _ = ClientSecret.objects.filter(expires_at__lt=before).delete()
    return deleted
