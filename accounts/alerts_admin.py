"""Alert and webhook admins: each account's alert settings (edited through the audited
service), fired alerts, and every webhook delivery with its outcome (read-only)."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from accounts.admin_base import (
    ReadOnlyAdmin,
    ReadOnlyWideListAdmin,
    actor_of,
    changed_fields,
)
from accounts.models.alerts import QuotaAlert, QuotaAlertSettings
from accounts.models.webhooks import WebhookDelivery
from accounts.services.alerts import SETTINGS_FIELDS, alert_settings_update
from accounts.services.webhooks import webhook_send_test
from accounts.tasks import deliver_webhook


@admin.register(QuotaAlertSettings)
class QuotaAlertSettingsAdmin(admin.ModelAdmin):
    """Where each account's quota alerts go (members edit theirs in the dashboard).

    The webhook's signing secret is never shown here: members see it once, on their
    alerts page, when they rotate it.
    """

    list_display = (
        "account",
        "thresholds",
        "email_enabled",
        "webhook_url",
        "secret_hint",
    )
    autocomplete_fields = ("account",)
    fields = ("account", *SETTINGS_FIELDS, "secret_hint", "updated_at")
    readonly_fields = ("secret_hint", "updated_at")
    actions = ("send_test",)

    @admin.display(description="signing secret")
    def secret_hint(self, obj: QuotaAlertSettings) -> str:
        return obj.secret_hint or "–"

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return (
            self.readonly_fields if obj is None else ("account", *self.readonly_fields)
        )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(
        self,
        request: HttpRequest,
        obj: QuotaAlertSettings,
        form: ModelForm,
        change: bool,
    ) -> None:
        actor = actor_of(request)
        saved, _secret = alert_settings_update(
            account=obj.account if change else form.cleaned_data["account"],
            actor=actor,
            actor_label=actor.get_username(),
            fields=changed_fields(form, SETTINGS_FIELDS),
        )
        obj.pk = saved.pk

    @admin.action(description="Send a test webhook", permissions=["change"])
    def send_test(
        self, request: HttpRequest, queryset: QuerySet[QuotaAlertSettings]
    ) -> None:
        """Queue a ``webhook.test`` event to each selected account's webhook."""
        sent = []
        for config in queryset.select_related("account"):
            try:
                delivery = webhook_send_test(account=config.account)
            except ValidationError:
                continue
            sent.append(config.account.name)
            transaction.on_commit(partial(deliver_webhook.delay, str(delivery.pk)))
        self.message_user(
            request,
            f"Test event sent to {len(sent)} webhook(s); see Webhook deliveries.",
            messages.SUCCESS if sent else messages.WARNING,
        )


@admin.register(QuotaAlert)
class QuotaAlertAdmin(ReadOnlyAdmin):
    """Fired quota alerts and their delivery, read-only."""

    list_display = (
        "fired_at",
        "account",
        "period",
        "metric",
        "threshold",
        "used",
        "limit",
        "email_sent_at",
        "webhook_sent_at",
    )
    list_filter = ("period", "metric", ("account", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("account",)
    ordering = ("-fired_at", "-id")


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyWideListAdmin):
    """Every webhook event sent, its attempts and their outcome, newest first."""

    list_display = (
        "created_at",
        "account",
        "event_type",
        "status",
        "attempts",
        "last_status_code",
        "last_error",
        "next_attempt_at",
        "delivered_at",
    )
    list_filter = (
        "status",
        "event_type",
        ("account", admin.RelatedOnlyFieldListFilter),
    )
    list_select_related = ("account",)
    search_fields = ("=id", "url", "account__name")
    ordering = ("-created_at",)
    date_hierarchy = "created_at"
