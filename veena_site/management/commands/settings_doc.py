"""``manage.py settings_doc``: print docs/settings.md, write it, or check it is current."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from veena_site.conf.registry import SETTINGS
from veena_site.settings_doc import PAGE, page


class Command(BaseCommand):
    """Generate the settings page from the settings registry."""

    help = "Print docs/settings.md as the settings registry generates it (--write, --check)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--write", action="store_true", help=f"write {PAGE}")
        parser.add_argument(
            "--check", action="store_true", help=f"fail if {PAGE} is stale"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        text = page()
        path = settings.BASE_DIR / PAGE
        if options["check"]:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                raise CommandError(
                    f"{PAGE} is stale: run manage.py settings_doc --write"
                )
            self.stdout.write(f"{PAGE} is current")
        elif options["write"]:
            path.write_text(text, encoding="utf-8")
            operators = len(SETTINGS.of_kind("env"))
            constants = len(SETTINGS.of_kind("constant"))
            self.stdout.write(
                f"wrote {PAGE}: {operators} environment variables, {constants} constants"
            )
        else:
            self.stdout.write(text, ending="")
