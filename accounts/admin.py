"""Staff admin (accounts §9): declarative ModelAdmins whose writes go through services.

Plans and accounts are here; keys in ``key_admin``, quotas in ``quota_admin``, alerts and
webhooks in ``alerts_admin``, and the read-only usage and audit admins in ``usage_admin``.
Every write an operator makes leaves one AuditLog entry; nothing is deleted.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Count, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from accounts.admin_base import actor_of, changed_fields
from accounts.models.accounts import Account
from accounts.models.api_keys import ApiKey
from accounts.models.choices import Endpoint, QuotaMetric
from accounts.models.plans import Plan
from accounts.selectors.quota import LABELS, effective_limits, limit_text
from accounts.services.accounts import (
    ACCOUNT_FIELDS,
    PLAN_FIELDS,
    account_create,
    account_update,
    plan_create,
    plan_update,
)


class PlanForm(forms.ModelForm):
    """A plan, its endpoints as checkboxes (the model keeps them as a JSON list)."""

    allowed_endpoints = forms.MultipleChoiceField(
        choices=Endpoint.choices,
        widget=forms.CheckboxSelectMultiple,
        help_text="The endpoints keys on this plan may use.",
    )

    class Meta:
        model = Plan
        fields = PLAN_FIELDS


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    """Plans and every limit; writes go through ``plan_create`` and ``plan_update`` (AD2).

    Plans are not deleted: accounts point at them, and the audit log names them.
    """

    form = PlanForm
    list_display = PLAN_FIELDS
    search_fields = ("name",)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(
        self, request: HttpRequest, obj: Plan, form: ModelForm, change: bool
    ) -> None:
        actor = actor_of(request)
        if change:
            plan_update(
                plan=obj,
                actor=actor,
                actor_label=actor.get_username(),
                fields=changed_fields(form, PLAN_FIELDS),
            )
            return
        created = plan_create(
            actor=actor,
            actor_label=actor.get_username(),
            fields={name: form.cleaned_data[name] for name in PLAN_FIELDS},
        )
        obj.pk = created.pk


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
    """Accounts; writes go through ``account_create`` and ``account_update``, members
    included (AD2, A7). Accounts are deactivated, never deleted (M1)."""

    list_display = ("name", "slug", "plan", "is_active", "member_count", "dashboard")
    list_filter = ("plan", "is_active")
    list_select_related = ("plan",)
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}
    filter_horizontal = ("members",)
    readonly_fields = ("created_at", "dashboard", "quota")
    inlines = (ApiKeyInline,)
    actions = ("deactivate_selected",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Account]:
        return (
            super()
            .get_queryset(request)
            .annotate(_members=Count("members", distinct=True))
        )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="dashboard")
    def dashboard(self, obj: Account) -> str:
        if obj.pk is None:
            return "–"
        url = reverse("dashboard:usage", args=[obj.slug])
        return format_html('<a href="{}">usage dashboard</a>', url)

    @admin.display(description="monthly quota")
    def quota(self, obj: Account) -> str:
        """Each metric's effective limit and where it comes from, with links."""
        if obj.pk is None:
            return "–"
        limits = effective_limits(account=obj, now=timezone.now())
        rows = format_html_join(
            "",
            "<li>{}: {}</li>",
            (
                (
                    LABELS[QuotaMetric(metric)],
                    limit_text(limit, plan_name=obj.plan.name),
                )
                for metric, limit in limits.items()
            ),
        )
        overrides = reverse("admin:accounts_quotaoverride_changelist")
        add = reverse("admin:accounts_quotaoverride_add")
        return format_html(
            '<ul class="quota-limits">{}</ul><a href="{}?account__id__exact={}">'
            'overrides and top-ups</a> · <a href="{}?account={}">add one</a>',
            rows,
            overrides,
            obj.pk,
            add,
            obj.pk,
        )

    @admin.display(description="members", ordering="_members")
    def member_count(self, obj: Account) -> int:
        return int(getattr(obj, "_members", 0))

    def save_model(
        self, request: HttpRequest, obj: Account, form: ModelForm, change: bool
    ) -> None:
        actor = actor_of(request)
        members = list(form.cleaned_data.get("members") or [])
        if change:
            account_update(
                account=obj,
                actor=actor,
                actor_label=actor.get_username(),
                fields=changed_fields(form, ACCOUNT_FIELDS),
                members=members,
            )
            return
        created = account_create(
            actor=actor,
            actor_label=actor.get_username(),
            fields={name: form.cleaned_data[name] for name in ACCOUNT_FIELDS},
            members=members,
        )
        obj.pk = created.pk

    def save_related(
        self, request: HttpRequest, form: ModelForm, formsets: Any, change: bool
    ) -> None:
        """Members were saved (and audited) by the service; the key inline is read-only."""
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)

    @admin.action(description="Deactivate selected accounts", permissions=["change"])
    def deactivate_selected(
        self, request: HttpRequest, queryset: QuerySet[Account]
    ) -> None:
        actor = actor_of(request)
        for account in queryset.filter(is_active=True):
            account_update(
                account=account,
                actor=actor,
                actor_label=actor.get_username(),
                fields={"is_active": False},
            )


# The other admins register on import.
from accounts import (  # noqa: E402, F401
    alerts_admin,
    key_admin,
    quota_admin,
    usage_admin,
)
