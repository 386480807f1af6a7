"""``manage.py create_api_key``: create an API key and print it once (accounts T4, K4)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from accounts.models.plans import Plan
from accounts.services.accounts import account_get_or_create
from accounts.services.api_keys import api_key_create

ACTOR_LABEL = "manage.py create_api_key"


class Command(BaseCommand):
    """Create a key; the raw key is the last line of stdout and goes nowhere else."""

    help = (
        "Create an API key for an account (matched by slug, then name; created if missing). "
        "The raw key is printed once, as the last line of stdout."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--account", required=True, help="Account slug or name.")
        parser.add_argument(
            "--plan", help="Plan name for a new account (default: default)."
        )
        parser.add_argument("--name", default="default", help="Key name.")
        parser.add_argument("--expires-in-days", type=int, help="Expire after N days.")
        parser.add_argument(
            "--origin",
            action="append",
            default=[],
            help="Allowed browser origin (repeatable).",
        )
        parser.add_argument("--rpm", type=int, help="Per-key requests per minute.")
        parser.add_argument(
            "--concurrency", type=int, help="Per-key concurrent streams."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        plan = self._plan(options["plan"])
        days = options["expires_in_days"]
        if days is not None and days < 1:
            raise CommandError("--expires-in-days must be at least 1")
        try:
            with transaction.atomic():
                account = account_get_or_create(
                    name=options["account"], plan=plan, actor_label=ACTOR_LABEL
                )
                api_key, raw = api_key_create(
                    account=account,
                    name=options["name"],
                    actor=None,
                    actor_label=ACTOR_LABEL,
                    expires_at=timezone.now() + timedelta(days=days) if days else None,
                    allowed_origins=options["origin"],
                    rpm_limit=options["rpm"],
                    concurrency_limit=options["concurrency"],
                )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(
            f"Account: {account.name} ({account.slug}), plan {account.plan.name}"
        )
        self.stdout.write(f"Key id:  {api_key.id}")
        self.stdout.write(f"Key:     {api_key.display} ({api_key.name})")
        self.stdout.write("Store the key below now; it will not be shown again.")
        self.stdout.write(raw)

    def _plan(self, name: str | None) -> Plan | None:
        if name is None:
            return None
        try:
            return Plan.objects.get(name=name)
        except Plan.DoesNotExist:
            raise CommandError(f"No plan named {name!r}") from None
