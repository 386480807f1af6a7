"""The API key admin (accounts AD3–AD5): created through ``api_key_create`` and shown
once, edited through ``api_key_update``, revoked with a reason, never deleted."""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from accounts.admin_base import actor_of, changed_fields, confirm_with_reason
from accounts.exceptions import KeyAlreadyRevoked
from accounts.models.api_keys import ApiKey
from accounts.models.choices import KeyStatus
from accounts.services.api_keys import (
    EDITABLE_FIELDS,
    api_key_create,
    api_key_revoke,
    api_key_update,
)


class KeyStatusFilter(admin.SimpleListFilter):
    """Filter keys by ``ApiKey.status``."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return list(KeyStatus.choices)

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[ApiKey]
    ) -> QuerySet[ApiKey]:
        now = timezone.now()
        live = Q(revoked_at__isnull=True)
        if self.value() == KeyStatus.ACTIVE:
            return queryset.filter(
                live & (Q(expires_at__isnull=True) | Q(expires_at__gt=now))
            )
        if self.value() == KeyStatus.EXPIRED:
            return queryset.filter(live, expires_at__lte=now)
        if self.value() == KeyStatus.REVOKED:
            return queryset.filter(revoked_at__isnull=False)
        return queryset


def _row(row: str | tuple[str, ...]) -> tuple[str, ...]:
    return (row,) if isinstance(row, str) else row


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """API keys: created through ``api_key_create``, shown once, never deleted (AD3–AD5)."""

    list_display = (
        "display",
        "name",
        "account",
        "kind",
        "status",
        "created_at",
        "last_used_at",
        "expires_at",
        "usage",
    )
    list_filter = (KeyStatusFilter, "kind", "account", "created_at", "expires_at")
    list_select_related = ("account",)
    search_fields = ("name", "key_prefix", "account__name", "=id")
    autocomplete_fields = ("account",)
    actions = ("revoke_selected",)
    add_fields = ("account", *EDITABLE_FIELDS)
    change_fields = (
        ("id", "account", "display", "kind", "status"),
        *EDITABLE_FIELDS,
        ("created_at", "created_by", "last_used_at", "version"),
        ("revoked_at", "revoked_by", "revoked_reason"),
        "usage",
    )
    # The raw key lives here between save_model and response_add, never longer.
    _new_keys: WeakKeyDictionary[HttpRequest, str] = WeakKeyDictionary()

    @admin.display(description="usage")
    def usage(self, obj: ApiKey) -> str:
        """Links to the key's usage records (newest first)."""
        url = reverse("admin:accounts_usagerecord_changelist")
        return format_html(
            '<a href="{}?api_key__id__exact={}">records</a>', url, obj.pk
        )

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> Any:
        return self.add_fields if obj is None else self.change_fields

    def get_readonly_fields(
        self, request: HttpRequest, obj: ApiKey | None = None
    ) -> Any:
        if obj is None:
            return ()
        fixed = [
            f
            for row in self.change_fields
            for f in _row(row)
            if f not in EDITABLE_FIELDS
        ]
        return fixed if obj.revoked_at is None else [*fixed, *EDITABLE_FIELDS]

    def has_change_permission(
        self, request: HttpRequest, obj: ApiKey | None = None
    ) -> bool:
        if obj is not None and obj.revoked_at is not None:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(
        self, request: HttpRequest, obj: ApiKey | None = None
    ) -> bool:
        return False

    def lookup_allowed(  # type: ignore[override]
        self, lookup: str, value: str, request: HttpRequest
    ) -> bool:
        if lookup.startswith("key_hash"):
            return False
        return super().lookup_allowed(lookup, value, request)

    def save_model(
        self, request: HttpRequest, obj: ApiKey, form: ModelForm, change: bool
    ) -> None:
        actor = actor_of(request)
        if change:
            api_key_update(
                api_key=obj,
                actor=actor,
                actor_label=actor.get_username(),
                fields=changed_fields(form, EDITABLE_FIELDS),
            )
            return
        data = form.cleaned_data
        api_key, raw = api_key_create(
            account=data["account"],
            name=data["name"],
            actor=actor,
            actor_label=actor.get_username(),
            expires_at=data.get("expires_at"),
            allowed_origins=data.get("allowed_origins") or [],
            rpm_limit=data.get("rpm_limit"),
            concurrency_limit=data.get("concurrency_limit"),
        )
        obj.pk = api_key.pk
        obj.refresh_from_db()
        self._new_keys[request] = raw

    def response_add(
        self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None
    ) -> HttpResponse:
        """Show the raw key once, on this page only (AD3, K4); no message, no redirect."""
        raw = self._new_keys.pop(request, None)
        if raw is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "API key created",
            "api_key": obj,
            "raw_key": raw,
            "change_url": reverse("admin:accounts_apikey_change", args=[obj.pk]),
            "changelist_url": reverse("admin:accounts_apikey_changelist"),
        }
        response = TemplateResponse(request, "accounts/admin/key_created.html", context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke_selected(
        self, request: HttpRequest, queryset: QuerySet[ApiKey]
    ) -> HttpResponse | None:
        """AD5: ask for a reason, then revoke each key; revoked ones are skipped."""

        def revoke(api_key: ApiKey, reason: str) -> None:
            try:
                api_key_revoke(api_key=api_key, actor=actor_of(request), reason=reason)
            except KeyAlreadyRevoked:
                raise ValidationError("already revoked") from None

        return confirm_with_reason(
            self,
            request,
            queryset.select_related("account"),
            action="revoke_selected",
            question="Revoke these keys? Revocation cannot be undone.",
            submit="Revoke the keys",
            apply=revoke,
        )
