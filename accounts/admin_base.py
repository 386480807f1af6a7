"""What the accounts ModelAdmins share: the acting user, changed fields, read-only admins
and the confirmation page of an action that asks for a reason."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

if TYPE_CHECKING:
    from django.contrib.auth.models import User

REASON_MAX_LENGTH = 200


def actor_of(request: HttpRequest) -> User:
    """The staff user behind an admin request (the admin site admits no one else)."""
    assert request.user.is_authenticated
    return cast("User", request.user)


def changed_fields(form: ModelForm, fields: Iterable[str]) -> dict[str, Any]:
    """The cleaned values of the form's changed fields among ``fields``."""
    wanted = set(fields)
    return {
        name: form.cleaned_data[name] for name in form.changed_data if name in wanted
    }


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewable by staff with view permission; nobody adds, changes or deletes."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class WideListAdmin(admin.ModelAdmin):
    """A list of many columns: its page leaves out the navigation sidebar, so the columns
    that matter fit a 1280-pixel window beside the filters."""

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = {"is_nav_sidebar_enabled": False, **(extra_context or {})}
        return super().changelist_view(request, context)


class ReadOnlyWideListAdmin(WideListAdmin, ReadOnlyAdmin):
    """A read-only list of many columns."""


class ReasonForm(forms.Form):
    """The reason an action asks for; it goes in the audit log."""

    reason = forms.CharField(max_length=REASON_MAX_LENGTH)


def confirm_with_reason(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet[Any],
    *,
    action: str,
    question: str,
    submit: str,
    apply: Callable[[Any, str], None],
) -> HttpResponse | None:
    """Show the objects and ask for a reason; once confirmed, ``apply(obj, reason)`` each
    and report which were done and which were skipped (a ValidationError skips one)."""
    form = ReasonForm(request.POST if "confirm" in request.POST else None)
    if not form.is_valid():
        context = {
            **model_admin.admin_site.each_context(request),
            "opts": model_admin.opts,
            "title": submit,
            "objects": list(queryset),
            "form": form,
            "action": action,
            "question": question,
            "submit": submit,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "accounts/admin/reason_confirm.html", context)
    _apply_each(model_admin, request, queryset, submit, apply, form)
    return None


def _apply_each(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet[Any],
    submit: str,
    apply: Callable[[Any, str], None],
    form: ReasonForm,
) -> None:
    done, skipped = [], []
    for obj in queryset:
        try:
            apply(obj, form.cleaned_data["reason"])
            done.append(str(obj))
        except ValidationError as exc:
            skipped.append(f"{obj} ({' '.join(exc.messages)})")
    model_admin.message_user(request, f"{submit}: {len(done)} done.", messages.SUCCESS)
    if skipped:
        model_admin.message_user(
            request, f"{len(skipped)} skipped: {', '.join(skipped)}", messages.WARNING
        )
