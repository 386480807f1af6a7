"""``manage.py revoke_api_key``: revoke a key for good (accounts K6, T4)."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.exceptions import KeyAlreadyRevoked
from accounts.models.api_keys import ApiKey
from accounts.services.api_keys import api_key_revoke

ACTOR_LABEL = "manage.py revoke_api_key"


class Command(BaseCommand):
    """Revoke one key by its id; revocation cannot be undone."""

    help = "Revoke an API key by id (irreversible)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key_id", nargs="?", help="The key's id (UUID).")
        parser.add_argument(
            "--key-id", dest="key_id_option", help="The key's id (UUID)."
        )
        parser.add_argument("--reason", required=True, help="Why the key is revoked.")

    def handle(self, *args: Any, **options: Any) -> None:
        api_key = self._api_key(options["key_id"] or options["key_id_option"])
        try:
            api_key = api_key_revoke(
                api_key=api_key,
                actor=None,
                reason=options["reason"],
                actor_label=ACTOR_LABEL,
            )
        except KeyAlreadyRevoked:
            raise CommandError(f"API key {api_key.id} is already revoked") from None
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(
            f"Revoked {api_key.id} ({api_key.display}), version {api_key.version}"
        )

    def _api_key(self, key_id: str | None) -> ApiKey:
        if not key_id:
            raise CommandError("Give the key id, as KEY_ID or --key-id")
        try:
            return ApiKey.objects.get(pk=uuid.UUID(key_id))
        except (ValueError, ApiKey.DoesNotExist):
            raise CommandError(f"No API key with id {key_id!r}") from None
