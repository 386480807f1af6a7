"""Staff admin (accounts §9): declarative ModelAdmins whose writes go through services."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast
from weakref import WeakKeyDictionary

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import Count, Q, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from accounts.exceptions import KeyAlreadyRevoked
from accounts.models.accounts import Account
from accounts.models.api_keys import REVOKED_REASON_MAX_LENGTH, ApiKey
from accounts.models.choices import KeyStatus
from accounts.models.plans import Plan
from accounts.services.accounts import (
    ACCOUNT_FIELDS,
    PLAN_FIELDS,
    account_update,
    plan_update,
)
from accounts.services.api_keys import (
    EDITABLE_FIELDS,
    api_key_create,
    api_key_revoke,
    api_key_update,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def _actor(request: HttpRequest) -> User:
    """The staff user behind an admin request (the admin site admits no one else)."""
    assert request.user.is_authenticated
    return cast("User", request.user)


def _changed(form: ModelForm, fields: tuple[str, ...]) -> dict[str, Any]:
    return {
        name: form.cleaned_data[name] for name in form.changed_data if name in fields
    }


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    """Plans and every limit; edits go through ``plan_update`` (AD2)."""

    list_display = PLAN_FIELDS
    search_fields = ("name",)

    def save_model(
        self, request: HttpRequest, obj: Plan, form: ModelForm, change: bool
    ) -> None:
        if not change:
            super().save_model(request, obj, form, change)
            return
        plan_update(
            plan=obj,
            actor=_actor(request),
            actor_label=_actor(request).get_username(),
            fields=_changed(form, PLAN_FIELDS),
        )


class ApiKeyInline(admin.TabularInline):
    """The account's keys, read-only."""

    model = ApiKey
    fields = ("display", "name", "status", "last_used_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin):
    """Accounts; edits go through ``account_update`` (AD2, A7)."""

    list_display = ("name", "slug", "plan", "is_active", "member_count", "dashboard")
    list_filter = ("plan", "is_active")
    list_select_related = ("plan",)
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}
    filter_horizontal = ("members",)
    readonly_fields = ("created_at", "dashboard")
    inlines = (ApiKeyInline,)
    actions = ("deactivate_selected",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Account]:
        return (
            super()
            .get_queryset(request)
            .annotate(_members=Count("members", distinct=True))
        )

    @admin.display(description="dashboard")
    def dashboard(self, obj: Account) -> str:
        if obj.pk is None:
            return "–"
        url = reverse("dashboard:usage", args=[obj.slug])
        return format_html('<a href="{}">usage dashboard</a>', url)

    @admin.display(description="members", ordering="_members")
    def member_count(self, obj: Account) -> int:
        return int(getattr(obj, "_members", 0))

    def save_model(
        self, request: HttpRequest, obj: Account, form: ModelForm, change: bool
    ) -> None:
        if not change:
            super().save_model(request, obj, form, change)
            return
        account_update(
            account=obj,
            actor=_actor(request),
            actor_label=_actor(request).get_username(),
            fields=_changed(form, ACCOUNT_FIELDS),
        )

    @admin.action(description="Deactivate selected accounts", permissions=["change"])
    def deactivate_selected(
        self, request: HttpRequest, queryset: QuerySet[Account]
    ) -> None:
        for account in queryset.filter(is_active=True):
            account_update(
                account=account,
                actor=_actor(request),
                actor_label=_actor(request).get_username(),
                fields={"is_active": False},
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


class RevokeForm(forms.Form):
    """The reason asked for by "Revoke selected keys" (AD5)."""

    reason = forms.CharField(max_length=REVOKED_REASON_MAX_LENGTH)


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
        if change:
            api_key_update(
                api_key=obj,
                actor=_actor(request),
                actor_label=_actor(request).get_username(),
                fields=_changed(form, EDITABLE_FIELDS),
            )
            return
        data = form.cleaned_data
        api_key, raw = api_key_create(
            account=data["account"],
            name=data["name"],
            actor=_actor(request),
            actor_label=_actor(request).get_username(),
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
        form = RevokeForm(request.POST if "confirm" in request.POST else None)
        if not form.is_valid():
            context = {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "title": "Revoke API keys",
                "queryset": queryset.select_related("account"),
                "form": form,
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(
                request, "accounts/admin/revoke_confirm.html", context
            )
        revoked, skipped = [], []
        for api_key in queryset:
            try:
                api_key_revoke(
                    api_key=api_key,
                    actor=_actor(request),
                    reason=form.cleaned_data["reason"],
                )
                revoked.append(api_key.display)
            except KeyAlreadyRevoked:
                skipped.append(api_key.display)
        self.message_user(request, f"Revoked {len(revoked)} key(s).", messages.SUCCESS)
        if skipped:
            self.message_user(
                request,
                f"Already revoked, skipped: {', '.join(skipped)}",
                messages.WARNING,
            )
        return None


def _row(row: str | tuple[str, ...]) -> tuple[str, ...]:
    return (row,) if isinstance(row, str) else row


# The read-only usage, quota, audit and alert admins (registered on import).
from accounts import usage_admin  # noqa: E402, F401
