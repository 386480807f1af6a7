"""Quota admins: overrides and top-ups of an account's monthly limits, and counters with
their corrections. Each write goes through ``accounts.services.quota_overrides`` and is
audited once; none is edited or deleted afterwards (an override is ended instead)."""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.widgets import AdminDateWidget
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from accounts.admin_base import ReadOnlyAdmin, actor_of, confirm_with_reason
from accounts.models.choices import QuotaOverrideKind, stored_units
from accounts.models.quota import QuotaAdjustment, QuotaCounter, QuotaOverride
from accounts.selectors.quota import month_bounds
from accounts.services.quota import period_of, quota_used
from accounts.services.quota_overrides import (
    quota_counter_adjust,
    quota_override_create,
    quota_override_end,
)

DURATIONS = [
    ("period", "For this month (ends on the 1st of next month, 00:00 UTC)"),
    ("until", "Until a date (00:00 UTC of that day)"),
    ("open", "Until ended (monthly limits only)"),
]


class QuotaOverrideForm(forms.ModelForm):
    """An override or top-up: its metric, amount, how long (``instance.ends_at``), why."""

    duration = forms.ChoiceField(
        choices=DURATIONS, widget=forms.RadioSelect, initial="period"
    )
    until = forms.DateField(required=False, widget=AdminDateWidget, label="End date")

    class Meta:
        model = QuotaOverride
        fields = ("account", "metric", "kind", "amount", "reason")
        widgets = {"reason": forms.Textarea(attrs={"rows": 3})}

    def clean(self) -> dict[str, Any]:
        """Turn the duration into the override's end, which must lie ahead."""
        data = super().clean() or {}
        top_up = data.get("kind") == QuotaOverrideKind.TOP_UP
        if top_up and not data.get("amount"):
            self.add_error("amount", "A top-up needs an amount above 0.")
        self.instance.ends_at = self._ends_at(data, top_up)
        return data

    def _ends_at(self, data: dict[str, Any], top_up: bool) -> datetime | None:
        now = timezone.now()
        duration, day = data.get("duration"), data.get("until")
        if duration == "period":
            return month_bounds(now)[1]
        if duration == "until":
            if day is None:
                raise ValidationError({"until": "Pick the day it ends."})
            ends = datetime.combine(day, time(), UTC)
            if ends <= now:
                raise ValidationError({"until": "Pick a day after today."})
            return ends
        if top_up:
            raise ValidationError({"duration": "A top-up needs an end."})
        return None


@admin.register(QuotaOverride)
class QuotaOverrideAdmin(admin.ModelAdmin):
    """Per-account monthly limits and top-ups; added with a reason, ended, never edited."""

    form = QuotaOverrideForm
    list_display = (
        "account",
        "metric",
        "kind",
        "amount",
        "starts_at",
        "ends_at",
        "state",
        "reason",
        "created_by",
    )
    list_filter = ("kind", "metric", ("account", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("account", "created_by")
    search_fields = ("account__name", "account__slug", "reason")
    autocomplete_fields = ("account",)
    ordering = ("-starts_at", "-id")
    actions = ("end_selected",)
    fields = (
        "account",
        "metric",
        "kind",
        "amount",
        "duration",
        "until",
        "reason",
    )
    readonly_view_fields = (
        "account",
        "metric",
        "kind",
        "amount",
        "starts_at",
        "ends_at",
        "reason",
        "created_at",
        "created_by",
    )

    @admin.display(description="state")
    def state(self, obj: QuotaOverride) -> str:
        return "in effect" if obj.in_effect(timezone.now()) else "ended"

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.fields if obj is None else self.readonly_view_fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else self.readonly_view_fields

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The change permission runs the "end" action; the form itself never edits.
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(
        self, request: HttpRequest, obj: QuotaOverride, form: ModelForm, change: bool
    ) -> None:
        assert not change, "overrides are never edited"
        data, actor = form.cleaned_data, actor_of(request)
        created = quota_override_create(
            account=data["account"],
            metric=data["metric"],
            kind=data["kind"],
            amount=data.get("amount"),
            ends_at=form.instance.ends_at,
            reason=data["reason"],
            actor=actor,
            actor_label=actor.get_username(),
        )
        obj.pk = created.pk

    @admin.action(description="End selected overrides now", permissions=["change"])
    def end_selected(
        self, request: HttpRequest, queryset: QuerySet[QuotaOverride]
    ) -> HttpResponse | None:
        """Ask for a reason, then end each override still in effect."""
        actor = actor_of(request)

        def end(override: QuotaOverride, reason: str) -> None:
            quota_override_end(
                override=override,
                reason=reason,
                actor=actor,
                actor_label=actor.get_username(),
            )

        return confirm_with_reason(
            self,
            request,
            queryset.select_related("account"),
            action="end_selected",
            question="End these overrides now? The account's limit goes back to what "
            "is left (the plan's, or other overrides).",
            submit="End the overrides",
            apply=end,
        )


class QuotaAdjustmentForm(forms.ModelForm):
    """A correction of one counter; it may not take the counter below 0."""

    period = forms.RegexField(
        regex=r"^\d{4}-(0[1-9]|1[0-2])$",
        help_text="YYYY-MM (UTC).",
        error_messages={"invalid": "Enter a month as YYYY-MM."},
    )

    class Meta:
        model = QuotaAdjustment
        fields = ("account", "metric", "period", "amount", "reason")
        widgets = {"reason": forms.Textarea(attrs={"rows": 3})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["period"].initial = period_of(timezone.now())

    def clean(self) -> dict[str, Any]:
        """Refuse 0, a month ahead, and a credit larger than what is counted."""
        data = super().clean() or {}
        if self.errors:
            return data
        if data["amount"] == 0:
            raise ValidationError({"amount": "Enter a change other than 0."})
        if data["period"] > period_of(timezone.now()):
            raise ValidationError({"period": "That month has not started."})
        used = quota_used(
            account_id=data["account"].pk, metric=data["metric"], period=data["period"]
        )
        if used + stored_units(data["metric"], data["amount"]) < 0:
            raise ValidationError({"amount": "That would take the counter below 0."})
        return data


@admin.register(QuotaAdjustment)
class QuotaAdjustmentAdmin(admin.ModelAdmin):
    """Corrections of quota counters, with their reasons: added, never changed."""

    form = QuotaAdjustmentForm
    list_display = ("created_at", "account", "period", "metric", "amount", "reason")
    list_filter = ("period", "metric", ("account", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("account",)
    search_fields = ("account__name", "reason")
    autocomplete_fields = ("account",)
    ordering = ("-created_at", "-id")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(
        self, request: HttpRequest, obj: QuotaAdjustment, form: ModelForm, change: bool
    ) -> None:
        data, actor = form.cleaned_data, actor_of(request)
        created = quota_counter_adjust(
            account=data["account"],
            metric=data["metric"],
            period=data["period"],
            amount=data["amount"],
            reason=data["reason"],
            actor=actor,
            actor_label=actor.get_username(),
        )
        obj.pk = created.pk


@admin.register(QuotaCounter)
class QuotaCounterAdmin(ReadOnlyAdmin):
    """Monthly quota counters (AD7): read-only; "adjust" adds a correction with a reason."""

    list_display = ("account", "period", "metric", "used", "updated_at", "adjust")
    list_filter = ("period", "metric", "account")
    list_select_related = ("account",)

    @admin.display(description="")
    def adjust(self, obj: QuotaCounter) -> str:
        url = reverse("admin:accounts_quotaadjustment_add")
        return format_html(
            '<a href="{}?account={}&amp;metric={}&amp;period={}">adjust</a>',
            url,
            obj.account_id,
            obj.metric,
            obj.period,
        )
