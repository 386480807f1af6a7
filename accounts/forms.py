"""Dashboard forms: usage filters, key self-service and quota alert settings.

Invalid input becomes a form error shown on the page (accounts D3), never a 500.
"""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from accounts import buckets as bk
from accounts.models.alerts import QuotaAlertSettings, validate_thresholds
from accounts.models.api_keys import REVOKED_REASON_MAX_LENGTH
from accounts.models.choices import Route, UsageStatus
from accounts.origins import normalize_origin

DEFAULT_RANGE_DAYS = 7
# Hour buckets open on the last 48 hours: the current hour and the 47 before it (issue 37).
DEFAULT_HOUR_RANGE_HOURS = 48
HOUR_RANGE_DAYS_TO = 2  # hours up to a typed ``to`` alone: that day and the one before
TZ_COOKIE = "veena_tz"


class UUIDListField(forms.Field):
    """A repeatable query parameter of UUIDs (``?key=…&key=…``)."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[uuid.UUID]:
        """The UUIDs, or a validation error for anything that is not one."""
        if not value:
            return []
        values = value if isinstance(value, list | tuple) else [value]
        try:
            return list(dict.fromkeys(uuid.UUID(str(v)) for v in values))
        except ValueError:
            raise ValidationError("Enter valid key ids.", code="invalid") from None


class UsageFilterForm(forms.Form):
    """``from``/``to`` (local dates), ``granularity``, ``tz``, ``key``, ``route``, ``model``.

    ``now`` is the form's clock (tests pass one); the cleaned data adds ``since``, the first
    UTC hour of a rolling range (the default hour view), else None.
    """

    granularity = forms.ChoiceField(
        choices=[("day", "Days"), ("hour", "Hours")], required=False
    )
    tz = forms.CharField(required=False, max_length=64)
    key = UUIDListField(required=False)
    route = forms.MultipleChoiceField(choices=Route.choices, required=False)
    model = forms.CharField(required=False, max_length=100)

    def __init__(self, *args: Any, now: datetime | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["from"] = forms.DateField(required=False)
        self.fields["to"] = forms.DateField(required=False)
        self.now = now

    def clean_tz(self) -> str:
        """An IANA zone name; UTC when none is given."""
        name = self.cleaned_data.get("tz") or "UTC"
        try:
            bk.zone(name)
        except ValueError:
            raise ValidationError("Unknown time zone.", code="invalid") from None
        return str(name)

    def clean(self) -> dict[str, Any]:
        """Default the range to the last 7 local days, or for hours to the last 48 hours
        (the local days they touch, from ``since``), and enforce the caps."""
        data = super().clean() or {}
        if self.errors:
            return data
        tz = bk.zone(data.get("tz") or "UTC")
        now = self.now or datetime.now(UTC)
        width: bk.BucketWidth = "hour" if data.get("granularity") == "hour" else "day"
        since = None
        if width == "hour" and not data.get("from") and not data.get("to"):
            since = bk.floor_hour(now) - (DEFAULT_HOUR_RANGE_HOURS - 1) * bk.HOUR
        last = data.get("to") or bk.local_date(now, tz)
        span = HOUR_RANGE_DAYS_TO if width == "hour" else DEFAULT_RANGE_DAYS
        first = data.get("from") or last - timedelta(days=span - 1)
        if since is not None:
            first = bk.local_date(since, tz)
        problem = bk.range_error(first, last, width)
        if problem:
            raise ValidationError(problem, code="range")
        data.update(
            {
                "from": first,
                "to": last,
                "granularity": width,
                "tz": str(tz),
                "since": since,
            }
        )
        return data


class RecordsFilterForm(UsageFilterForm):
    """The usage filters plus request id, status, error code and the page cursor."""

    request_id = forms.CharField(required=False, max_length=64)
    status = forms.MultipleChoiceField(choices=UsageStatus.choices, required=False)
    error_code = forms.CharField(required=False, max_length=40)
    cursor = forms.CharField(required=False, max_length=200)


def parse_origins(text: str) -> list[str]:
    """Origins one per line (or comma-separated), each ``scheme://host[:port]``."""
    origins = []
    for raw in text.replace(",", "\n").splitlines():
        if not raw.strip():
            continue
        origin = normalize_origin(raw)
        if origin is None:
            raise ValidationError(
                "Each origin must look like https://app.example.com[:port].",
                code="invalid",
            )
        origins.append(origin)
    return list(dict.fromkeys(origins))


class KeyForm(forms.Form):
    """Name, expiry and allowed origins of a key (create and edit)."""

    name = forms.CharField(max_length=100)
    expires_on = forms.DateField(
        required=False,
        help_text="The key stops working at the start of this day (UTC). Empty: never.",
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    allowed_origins = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Browser origins, one per line. Empty: no browser may use the key.",
    )

    def clean_allowed_origins(self) -> list[str]:
        """The normalized origin list."""
        return parse_origins(self.cleaned_data.get("allowed_origins") or "")

    def clean_expires_on(self) -> date | None:
        """A future day, or none."""
        day = self.cleaned_data.get("expires_on")
        if day is not None and day <= datetime.now(bk.zone("UTC")).date():
            raise ValidationError("Pick a day after today.", code="past")
        return day

    def expires_at(self) -> datetime | None:
        """``expires_on`` as the UTC instant the key stops working."""
        day = self.cleaned_data.get("expires_on")
        return None if day is None else datetime.combine(day, time(), bk.zone("UTC"))


class RevokeForm(forms.Form):
    """Why a key is revoked (kept in the audit log)."""

    reason = forms.CharField(max_length=REVOKED_REASON_MAX_LENGTH, required=False)
    confirm = forms.BooleanField(
        required=True, label="I understand this cannot be undone"
    )


class AlertSettingsForm(forms.ModelForm):
    """Thresholds, email and webhook of an account's quota alerts."""

    thresholds_text = forms.CharField(
        label="Thresholds (%)",
        help_text="Comma-separated percentages of each monthly quota, e.g. 80, 95, 100.",
        widget=forms.TextInput(attrs={"inputmode": "numeric"}),
    )
    emails_text = forms.CharField(
        label="Email to",
        required=False,
        help_text="Comma-separated. Empty: every member of the account with an email.",
        widget=forms.TextInput(attrs={"placeholder": "ops@example.com"}),
    )

    class Meta:
        model = QuotaAlertSettings
        fields = ("email_enabled", "webhook_url")
        help_texts = {
            "email_enabled": "Email each alert to the addresses below.",
            "webhook_url": "Each alert is POSTed here as signed JSON. Empty: no webhook.",
        }
        widgets = {
            "webhook_url": forms.URLInput(
                attrs={"placeholder": "https://example.com/veena-webhook"}
            )
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["thresholds_text"].initial = ", ".join(
            str(t) for t in self.instance.thresholds
        )
        self.fields["emails_text"].initial = ", ".join(self.instance.emails)

    def clean_thresholds_text(self) -> list[int]:
        """Distinct whole percentages, sorted."""
        try:
            values = sorted(
                {int(part) for part in self.cleaned_data["thresholds_text"].split(",")}
            )
        except ValueError:
            raise ValidationError("Enter whole numbers.", code="invalid") from None
        validate_thresholds(values)
        return values

    def clean_webhook_url(self) -> str:
        """An http(s) URL, or none."""
        url = str(self.cleaned_data.get("webhook_url") or "")
        if url and not url.lower().startswith(("https://", "http://")):
            raise ValidationError("Use an http:// or https:// URL.", code="scheme")
        return url

    def clean_emails_text(self) -> list[str]:
        """Valid addresses."""
        field = forms.EmailField()
        raw = self.cleaned_data.get("emails_text") or ""
        return [field.clean(part.strip()) for part in raw.split(",") if part.strip()]
