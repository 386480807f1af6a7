"""App config for the wiring package (management commands, checks)."""

from django.apps import AppConfig


class VeenaSiteConfig(AppConfig):
    """Registers the gateway's management commands and system checks."""

    name = "veena_site"
    verbose_name = "Veena gateway"

    def ready(self) -> None:
        from veena_site import checks  # noqa: F401  (registers the checks)
