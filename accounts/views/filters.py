"""From a request's query string to a validated ``UsageFilter`` within a scope."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Any
from urllib.parse import unquote

from django.http import HttpRequest, QueryDict

from accounts import buckets as bk
from accounts.forms import TZ_COOKIE, UsageFilterForm
from accounts.models.api_keys import ApiKey
from accounts.models.choices import KeyStatus, Route, UsageStatus
from accounts.selectors import Scope, scope_keys
from accounts.selectors.sources import UsageFilter


def query_with_zone(request: HttpRequest) -> QueryDict:
    """The query string, with the viewer's zone from the cookie when it names none."""
    data = request.GET.copy()
    if not data.get("tz") and request.COOKIES.get(TZ_COOKIE):
        data["tz"] = unquote(request.COOKIES[TZ_COOKIE])  # set by dashboard.js
    return data


def usage_filter(form: UsageFilterForm, *, scope: Scope) -> UsageFilter:
    """The filter of a valid form; 403 when a key filter names another account's key."""
    data: dict[str, Any] = form.cleaned_data
    keys = scope_keys(scope=scope, key_ids=data["key"])
    return UsageFilter(
        first=data["from"],
        last=data["to"],
        tz=bk.zone(data["tz"]),
        width=data["granularity"],
        keys=tuple(sorted(keys, key=lambda k: str(k.id))),
        routes=tuple(data["route"]),
        models=(data["model"],) if data["model"] else (),
        since=data["since"],
    )


# Offered in the zone picker; any IANA name may be typed.
COMMON_ZONES = (
    "UTC",
    "America/Los_Angeles",
    "America/Denver",
    "America/Chicago",
    "America/New_York",
    "America/Sao_Paulo",
    "Europe/London",
    "Europe/Berlin",
    "Europe/Moscow",
    "Asia/Dubai",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Asia/Singapore",
    "Asia/Tokyo",
    "Australia/Sydney",
    "Pacific/Auckland",
)


def filter_choices(*, records: bool = False) -> dict[str, Any]:
    """What the filter form's pickers offer."""
    choices: dict[str, Any] = {
        "common_zones": COMMON_ZONES,
        "route_choices": Route.choices,
    }
    if records:
        choices["status_choices"] = UsageStatus.choices
    return choices


def form_values(form: UsageFilterForm) -> dict[str, Any]:
    """What the filter inputs show: the cleaned values, or what was typed when invalid.

    ``from`` and ``to`` show only what was typed: a default range stays a default, so
    switching between days and hours gets the other width's default (the page says which
    range it shows).
    """
    cleaned: dict[str, Any] = getattr(form, "cleaned_data", {})
    values: dict[str, Any] = {}
    for name in (
        "from",
        "to",
        "granularity",
        "tz",
        "model",
        "error_code",
        "request_id",
    ):
        typed = name in ("from", "to") or name not in cleaned
        value = form.data.get(name, "") if typed else cleaned[name]
        values[name] = value.isoformat() if isinstance(value, date) else value or ""
    values["tz"] = values["tz"] or "UTC"
    for name in ("route", "status"):
        values[name] = cleaned.get(name) or getattr(form.data, "getlist", list)(name)
    return values


@dataclass(frozen=True)
class KeyChoice:
    """One checkbox of the key filter: the key's name first, then its short form."""

    id: str
    name: str
    display: str
    checked: bool


def key_choices(keys: Iterable[ApiKey], form: UsageFilterForm) -> dict[str, Any]:
    """The key checkboxes: usable keys by name, revoked ones apart (shown on request,
    or when one of them is checked)."""
    picked = set(getattr(form.data, "getlist", lambda _name: [])("key"))
    active: list[KeyChoice] = []
    revoked: list[KeyChoice] = []
    for key in sorted(keys, key=lambda k: (k.name.casefold(), str(k.id))):
        choice = KeyChoice(str(key.id), key.name, key.display, str(key.id) in picked)
        (revoked if key.status == KeyStatus.REVOKED else active).append(choice)
    return {
        "active": active,
        "revoked": revoked,
        "revoked_open": any(c.checked for c in revoked),
    }
