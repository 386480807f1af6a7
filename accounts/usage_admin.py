"""Read-only staff admins: usage records, rollups and the audit log (AD6, AD7).

Nobody adds, changes or deletes a row here. Lists put what an operator scans first, in
columns that fit a 1280-pixel window.
"""

from __future__ import annotations

from datetime import datetime

from django.contrib import admin
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from accounts.admin_base import ReadOnlyWideListAdmin
from accounts.models.audit import AuditLog
from accounts.models.choices import Endpoint
from accounts.models.rollups import UsageRollup
from accounts.models.usage import UsageRecord

# The admin pages of the objects an audit entry can name.
AUDITED_MODELS = {
    "api_key": "apikey",
    "plan": "plan",
    "account": "account",
    "quota_override": "quotaoverride",
    "quota_counter": "quotacounter",
    "quota_alert_settings": "quotaalertsettings",
}


def utc(moment: datetime | None) -> str:
    """A compact UTC time for list columns."""
    return "–" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S}"


@admin.register(UsageRecord)
class UsageRecordAdmin(ReadOnlyWideListAdmin):
    """Usage records, newest first, read-only (AD6)."""

    list_display = (
        "started",
        "account",
        "key",
        "route",
        "model",
        "status",
        "error_code",
        "units",
        "seconds",
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
    ordering = ("-started_at", "-id")
    list_per_page = 50

    @admin.display(description="started (UTC)", ordering="started_at")
    def started(self, obj: UsageRecord) -> str:
        return utc(obj.started_at)

    @admin.display(description="key", ordering="api_key__key_prefix")
    def key(self, obj: UsageRecord) -> str:
        return obj.api_key.display

    @admin.display(description="counted")
    def units(self, obj: UsageRecord) -> str:
        """What the record charges (TTS characters in, or ASR audio in), or, for a row
        that folds many refused requests, how many it stands for."""
        if obj.requests != 1:
            return f"{obj.requests:,} refused"
        if obj.endpoint == Endpoint.TTS:
            return f"{obj.tts_chars_in:,} chars"
        return f"{obj.asr_audio_in_ms / 1000:,.1f} s audio"

    @admin.display(description="duration")
    def seconds(self, obj: UsageRecord) -> str:
        if obj.ended_at is None:
            return "open"
        return f"{(obj.ended_at - obj.started_at).total_seconds():,.1f} s"


@admin.register(UsageRollup)
class UsageRollupAdmin(ReadOnlyWideListAdmin):
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
    ordering = ("-bucket_start",)

    @admin.display(description="bucket start (UTC)", ordering="bucket_start")
    def bucket_utc(self, rollup: UsageRollup) -> str:
        """The bucket's start in UTC, which the column names."""
        return f"{rollup.bucket_start:%Y-%m-%d %H:%M}"


@admin.register(AuditLog)
class AuditLogAdmin(ReadOnlyWideListAdmin):
    """The audit log, newest first, read-only (AD7, M6): who changed what, how, and why."""

    list_display = (
        "when",
        "action",
        "actor_label",
        "account",
        "object",
        "changed",
        "short_reason",
    )
    list_filter = ("action", "actor", "account", "object_type")
    list_select_related = ("account",)
    search_fields = ("object_name", "object_id", "actor_label", "reason")
    ordering = ("-at", "-id")
    fields = (
        "at",
        "action",
        "actor",
        "actor_label",
        "account",
        "object",
        "object_id",
        "changes_table",
        "reason",
    )
    readonly_fields = fields

    @admin.display(description="at (UTC)", ordering="at")
    def when(self, obj: AuditLog) -> str:
        return utc(obj.at)

    @admin.display(description="object")
    def object(self, obj: AuditLog) -> str:
        """The object's name when it changed, linked to its page when it has one."""
        name = obj.object_name or obj.object_id
        label = f"{obj.object_type.replace('_', ' ')}: {name}"
        model = AUDITED_MODELS.get(obj.object_type)
        if model is None:
            return label
        try:
            url = reverse(f"admin:accounts_{model}_change", args=[obj.object_id])
        except NoReverseMatch:
            return label
        return format_html('<a href="{}">{}</a>', url, label)

    @admin.display(description="changed")
    def changed(self, obj: AuditLog) -> str:
        return ", ".join(sorted(obj.changes)) if isinstance(obj.changes, dict) else ""

    @admin.display(description="reason")
    def short_reason(self, obj: AuditLog) -> str:
        return Truncator(obj.reason).chars(60)

    @admin.display(description="changes")
    def changes_table(self, obj: AuditLog) -> str:
        """Each field: before → after."""
        rows = format_html_join(
            "",
            "<tr><th>{}</th><td>{}</td><td>{}</td></tr>",
            (
                (name, _value(pair[0]), _value(pair[1]))
                for name, pair in sorted(obj.changes.items())
            ),
        )
        return format_html(
            "<table><thead><tr><th>field</th><th>before</th><th>after</th></tr>"
            "</thead><tbody>{}</tbody></table>",
            rows,
        )


def _value(value: object) -> str:
    return "–" if value is None else str(value)
