"""Read-only staff admins: usage records, rollups, quota counters, audit log, alerts (AD6, AD7)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from accounts.models.alerts import QuotaAlert, QuotaAlertSettings
from accounts.models.audit import AuditLog
from accounts.models.quota import QuotaCounter
from accounts.models.rollups import UsageRollup
from accounts.models.usage import UsageRecord


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewable by staff with view permission; nobody adds, changes or deletes."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(UsageRecord)
class UsageRecordAdmin(ReadOnlyAdmin):
    """Usage records, read-only (AD6)."""

    list_display = (
        "started_utc",
        "request_id",
        "route",
        "model",
        "account",
        "api_key",
        "status",
        "requests",
        "error_code",
        "close_code",
        "tts_chars_in",
        "asr_audio_in_ms",
    )
    list_filter = (
        "status",
        "route",
        "model",
        ("account", admin.RelatedOnlyFieldListFilter),
        ("api_key", admin.RelatedOnlyFieldListFilter),
    )
    list_select_related = ("account", "api_key")
    search_fields = ("=id", "request_id", "api_key__key_prefix")
    date_hierarchy = "started_at"

    @admin.display(description="Started (UTC)", ordering="started_at")
    def started_utc(self, record: UsageRecord) -> str:
        """The admin names its zone: every time here is UTC (TIME_ZONE)."""
        return f"{record.started_at:%Y-%m-%d %H:%M:%S}"


@admin.register(UsageRollup)
class UsageRollupAdmin(ReadOnlyAdmin):
    """Hourly and daily rollups, read-only (AD7)."""

    list_display = (
        "bucket_utc",
        "granularity",
        "account",
        "api_key",
        "route",
        "model",
        "error_code",
        "requests",
        "computed_at",
    )
    list_filter = (
        "granularity",
        "route",
        "model",
        ("account", admin.RelatedOnlyFieldListFilter),
        ("api_key", admin.RelatedOnlyFieldListFilter),
    )
    list_select_related = ("account", "api_key")
    date_hierarchy = "bucket_start"

    @admin.display(description="Bucket start (UTC)", ordering="bucket_start")
    def bucket_utc(self, rollup: UsageRollup) -> str:
        """The bucket's start in UTC, which the column names."""
        return f"{rollup.bucket_start:%Y-%m-%d %H:%M}"


@admin.register(QuotaCounter)
class QuotaCounterAdmin(ReadOnlyAdmin):
    """Monthly quota counters, read-only (AD7)."""

    list_display = ("account", "period", "metric", "used", "updated_at")
    list_filter = ("period", "metric", "account")
    list_select_related = ("account",)


@admin.register(AuditLog)
class AuditLogAdmin(ReadOnlyAdmin):
    """The audit log, newest first, read-only (AD7)."""

    list_display = (
        "at",
        "action",
        "actor_label",
        "account",
        "object_type",
        "object_id",
    )
    list_filter = ("action", "actor", "account")
    list_select_related = ("account",)
    search_fields = ("object_id", "actor_label")
    ordering = ("-at", "-id")


@admin.register(QuotaAlertSettings)
class QuotaAlertSettingsAdmin(admin.ModelAdmin):
    """Where each account's quota alerts go (members edit theirs in the dashboard)."""

    list_display = ("account", "thresholds", "email_enabled", "webhook_url")
    autocomplete_fields = ("account",)


@admin.register(QuotaAlert)
class QuotaAlertAdmin(ReadOnlyAdmin):
    """Fired quota alerts and their delivery, read-only."""

    list_display = ("fired_at", "account", "period", "metric", "threshold", "used")
    list_filter = ("period", "metric", ("account", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("account",)
