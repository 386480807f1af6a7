"""App config for API keys, plans, limits, quotas and usage."""

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Accounts, plans, API keys, usage records and their admin."""

    name = "accounts"
    verbose_name = "Accounts and usage"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from accounts import checks  # noqa: F401  (registers the system checks)
        from accounts.audit_metrics import register_collector

        register_collector()
