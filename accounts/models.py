"""Accounts, plans, API keys, quota counters, usage records, rollups and the audit log.

Models are thin (STYLE 37): fields, constraints, ``Meta``, ``__str__``, small properties and
``clean()``. Every write goes through ``accounts.services``.
"""

from __future__ import annotations

import re
import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from accounts.histogram import ASR_LATENCY_FIELDS, TTFB_FIELDS


class Endpoint(models.TextChoices):
    """A public streaming endpoint."""

    TTS = "tts", "TTS"
    ASR = "asr", "ASR"


class Route(models.TextChoices):
    """The public route a request came in on: endpoint plus transport."""

    TTS_WS = "tts_ws", "TTS WebSocket"
    TTS_REST = "tts_rest", "TTS REST"
    REALTIME = "realtime", "Realtime ASR"


class UsageStatus(models.TextChoices):
    """Lifecycle of a UsageRecord (accounts U9)."""

    STARTED = "started"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"
    ABANDONED = "abandoned"


class Granularity(models.TextChoices):
    """Bucket size of a UsageRollup."""

    HOUR = "hour"
    DAY = "day"


class QuotaMetric(models.TextChoices):
    """A metered quantity with a monthly quota (accounts Q1)."""

    TTS_CHARACTERS = "tts_characters"
    ASR_AUDIO_MS = "asr_audio_ms"


class AuditAction(models.TextChoices):
    """What an AuditLog row records."""

    KEY_CREATED = "key.created"
    KEY_REVOKED = "key.revoked"
    KEY_LIMITS_CHANGED = "key.limits_changed"
    KEY_UPDATED = "key.updated"
    PLAN_CHANGED = "plan.changed"
    ACCOUNT_CHANGED = "account.changed"
    ALERTS_CHANGED = "alerts.changed"


class KeyKind(models.TextChoices):
    """What a key is for: a customer's own key, or an account's playground key."""

    STANDARD = "standard"
    # Never handed out: the browser playground's short-lived tokens authenticate as it,
    # so its usage shows as "playground" (accounts.tokens).
    PLAYGROUND = "playground"


class KeyStatus(models.TextChoices):
    """The state of an ApiKey, derived from its timestamps."""

    ACTIVE = "active"
    EXPIRED = "expired"
    REVOKED = "revoked"


REVOKED_REASON_MAX_LENGTH = 200

# Browsers omit these ports from Origin; stored entries omit them too (accounts S13).
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_ORIGIN_RE = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.-]*)://"
    r"(?P<host>\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)"
    r"(?::(?P<port>[0-9]{1,5}))?"
)


def normalize_origin(value: str) -> str | None:
    """Return ``scheme://host[:port]`` lowercased without a default port, or None."""
    match = _ORIGIN_RE.fullmatch(value.strip().lower())
    if match is None:
        return None
    scheme, host, port = match["scheme"], match["host"], match["port"]
    if port is None or int(port) == DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{host}"
    if not 0 < int(port) <= 65535:
        return None
    return f"{scheme}://{host}:{int(port)}"


def default_allowed_endpoints() -> list[str]:
    """Every endpoint: the default of ``Plan.allowed_endpoints``."""
    return [Endpoint.TTS.value, Endpoint.ASR.value]


def validate_allowed_endpoints(value: object) -> None:
    """A non-empty list of distinct endpoints."""
    if (
        not isinstance(value, list)
        or not value
        or len(set(value)) != len(value)
        or any(item not in Endpoint.values for item in value)
    ):
        raise ValidationError(
            "Choose a non-empty list of distinct endpoints from %(choices)s.",
            params={"choices": Endpoint.values},
            code="invalid_endpoints",
        )


class Plan(models.Model):
    """Limits shared by every account on the plan."""

    name = models.CharField(max_length=50, unique=True)
    requests_per_minute = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(10_000)]
    )
    max_concurrent_streams = models.PositiveSmallIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(1_000)]
    )
    monthly_tts_characters = models.BigIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="Empty: unlimited.",
    )
    monthly_asr_seconds = models.BigIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="Empty: unlimited.",
    )
    max_session_seconds = models.PositiveIntegerField(
        validators=[MinValueValidator(60), MaxValueValidator(7_200)]
    )
    allowed_endpoints = models.JSONField(
        default=default_allowed_endpoints, validators=[validate_allowed_endpoints]
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    requests_per_minute__gte=1, requests_per_minute__lte=10_000
                ),
                name="acct_plan_rpm_range",
            ),
            models.CheckConstraint(
                condition=Q(
                    max_concurrent_streams__gte=1, max_concurrent_streams__lte=1_000
                ),
                name="acct_plan_concurrency_range",
            ),
            models.CheckConstraint(
                condition=Q(
                    max_session_seconds__gte=60, max_session_seconds__lte=7_200
                ),
                name="acct_plan_session_range",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """M2: a session must end before the rollup lookback window forgets it."""
        stale = getattr(settings, "USAGE_STALE_SECONDS", 15)
        lookback = getattr(settings, "ROLLUP_LOOKBACK_HOURS", 3) * 3600
        if self.max_session_seconds is not None and (
            self.max_session_seconds + stale + 600 > lookback
        ):
            raise ValidationError(
                {
                    "max_session_seconds": "Too long for ROLLUP_LOOKBACK_HOURS (accounts M2)."
                }
            )


class Account(models.Model):
    """A customer: owns API keys and usage, and is on one plan."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=200, unique=True)
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="accounts")
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="veena_accounts"
    )
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    def __str__(self) -> str:
        return self.name


class ApiKey(models.Model):
    """An API key, stored as a SHA-256 hash plus a display prefix and suffix (accounts K3)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        Account, on_delete=models.PROTECT, related_name="api_keys"
    )
    name = models.CharField(max_length=100)
    key_prefix = models.CharField(max_length=16, db_index=True, editable=False)
    last4 = models.CharField(max_length=4, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )
    revoked_reason = models.CharField(
        max_length=REVOKED_REASON_MAX_LENGTH, blank=True, editable=False
    )
    rpm_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Per-key requests per minute; empty: only the plan applies.",
    )
    concurrency_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Per-key concurrent streams; empty: only the plan applies.",
    )
    allowed_origins = models.JSONField(
        default=list,
        blank=True,
        help_text='Browser origins, e.g. ["https://app.example.com"]. Empty: no browser.',
    )
    version = models.PositiveIntegerField(default=1, editable=False)
    kind = models.CharField(
        max_length=10,
        choices=KeyKind.choices,
        default=KeyKind.STANDARD,
        editable=False,
    )

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.display} ({self.name})"

    @property
    def display(self) -> str:
        """The form shown to people: ``key_prefix…last4``, or ``playground``."""
        if self.kind == KeyKind.PLAYGROUND:
            return KeyKind.PLAYGROUND.value
        return f"{self.key_prefix}\u2026{self.last4}"

    @property
    def status(self) -> str:
        """``revoked``, ``expired`` or ``active``, checked in that order."""
        if self.revoked_at is not None:
            return KeyStatus.REVOKED
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return KeyStatus.EXPIRED
        return KeyStatus.ACTIVE

    def clean(self) -> None:
        """M3: key caps within the plan, origins of the form ``scheme://host[:port]``."""
        errors: dict[str, str] = {}
        origins = self.allowed_origins
        if not isinstance(origins, list) or not all(
            isinstance(o, str) for o in origins
        ):
            errors["allowed_origins"] = "Enter a list of origins."
        else:
            normalized = [normalize_origin(o) for o in origins]
            if None in normalized:
                errors["allowed_origins"] = "Each origin must be scheme://host[:port]."
            else:
                self.allowed_origins = list(dict.fromkeys(normalized))
        if self.account_id is not None:
            plan = self.account.plan
            if self.rpm_limit is not None and self.rpm_limit > plan.requests_per_minute:
                errors["rpm_limit"] = "Above the plan's requests per minute."
            if (
                self.concurrency_limit is not None
                and self.concurrency_limit > plan.max_concurrent_streams
            ):
                errors["concurrency_limit"] = "Above the plan's concurrent streams."
        if errors:
            raise ValidationError(errors)


class QuotaCounter(models.Model):
    """The authoritative monthly usage of one metric by one account (accounts Q3)."""

    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+")
    period = models.CharField(max_length=7, help_text="YYYY-MM (UTC)")
    metric = models.CharField(max_length=20, choices=QuotaMetric.choices)
    used = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["account", "period", "metric"], name="acct_quota_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.account_id} {self.period} {self.metric}={self.used}"


class UsageRecord(models.Model):
    """One TTS request or one ASR stream (accounts §6)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    stream_id = models.UUIDField()
    request_id = models.CharField(max_length=64)
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+")
    api_key = models.ForeignKey(ApiKey, on_delete=models.PROTECT, related_name="+")
    endpoint = models.CharField(max_length=3, choices=Endpoint.choices)
    route = models.CharField(max_length=10, choices=Route.choices)
    model = models.CharField(max_length=100)
    status = models.CharField(
        max_length=10, choices=UsageStatus.choices, default=UsageStatus.STARTED
    )
    error_code = models.CharField(max_length=40, blank=True)
    close_code = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    last_checkpoint_at = models.DateTimeField()
    checkpoint_seq = models.PositiveIntegerField(default=0)
    period = models.CharField(max_length=7, help_text="YYYY-MM (UTC) of started_at")
    instance = models.CharField(max_length=255, help_text="host:pid of the gateway")
    tts_chars_in = models.BigIntegerField(default=0)
    tts_audio_out_ms = models.BigIntegerField(default=0)
    ttfb_ms = models.PositiveIntegerField(null=True, blank=True)
    rtf = models.FloatField(null=True, blank=True)
    asr_audio_in_ms = models.BigIntegerField(default=0)
    asr_chars_out = models.BigIntegerField(default=0)
    asr_items = models.PositiveIntegerField(default=0)
    asr_latency_ms_sum = models.BigIntegerField(default=0)
    asr_latency_ms_max = models.PositiveIntegerField(default=0)
    # Per-item latencies binned as accounts.histogram defines (empty: no items yet).
    asr_latency_hist = models.JSONField(default=list, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["account", "started_at"], name="acct_usage_account_started"
            ),
            models.Index(
                fields=["api_key", "started_at"], name="acct_usage_key_started"
            ),
            models.Index(fields=["started_at"], name="acct_usage_started"),
            # The reaper's scan (accounts U10) touches only open records.
            models.Index(
                fields=["last_checkpoint_at"],
                condition=Q(status="started"),
                name="acct_usage_open_checkpoint",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.endpoint} {self.id} {self.status}"


class RollupMeasures(models.Model):
    """What a rollup row sums (accounts §7, G3), shared by the key and account rollups."""

    granularity = models.CharField(max_length=4, choices=Granularity.choices)
    bucket_start = models.DateTimeField()
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+")
    endpoint = models.CharField(max_length=3, choices=Endpoint.choices)
    route = models.CharField(max_length=10, choices=Route.choices)
    model = models.CharField(max_length=100)
    # Blank for every record without one; failures are split by code.
    error_code = models.CharField(max_length=40, blank=True)
    requests = models.BigIntegerField(default=0)
    completed = models.BigIntegerField(default=0)
    cancelled = models.BigIntegerField(default=0)
    failed = models.BigIntegerField(default=0)
    abandoned = models.BigIntegerField(default=0)
    tts_chars_in = models.BigIntegerField(default=0)
    tts_audio_out_ms = models.BigIntegerField(default=0)
    tts_duration_ms = models.BigIntegerField(default=0)
    ttfb_ms_sum = models.BigIntegerField(default=0)
    ttfb_count = models.BigIntegerField(default=0)
    ttfb_ms_max = models.BigIntegerField(default=0)
    asr_audio_in_ms = models.BigIntegerField(default=0)
    asr_chars_out = models.BigIntegerField(default=0)
    asr_items = models.BigIntegerField(default=0)
    asr_latency_ms_sum = models.BigIntegerField(default=0)
    asr_latency_ms_max = models.BigIntegerField(default=0)
    computed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.granularity} {self.bucket_start:%Y-%m-%d %H:%M} {self.endpoint}"


# One count per latency bin (accounts.histogram): TTS time to first byte, ASR
# commit→completed per item. Summing a column merges histograms.
for _name in (*TTFB_FIELDS, *ASR_LATENCY_FIELDS):
    RollupMeasures.add_to_class(_name, models.BigIntegerField(default=0))


class UsageRollup(RollupMeasures):
    """Usage summed per hour or day, account, key, endpoint and model (accounts §7)."""

    api_key = models.ForeignKey(ApiKey, on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [
            # Every key column is NOT NULL, so PostgreSQL cannot let duplicates in (G2).
            models.UniqueConstraint(
                fields=[
                    "granularity",
                    "bucket_start",
                    "account",
                    "api_key",
                    "endpoint",
                    "route",
                    "model",
                    "error_code",
                ],
                name="acct_rollup_key_unique",
            )
        ]
        indexes = [
            models.Index(
                fields=["account", "granularity", "bucket_start"],
                name="acct_rollup_account_bucket",
            ),
            models.Index(
                fields=["api_key", "granularity", "bucket_start"],
                name="acct_rollup_key_bucket",
            ),
        ]


class AccountRollup(RollupMeasures):
    """UsageRollup summed over the account's keys: what charts read when no key is picked.

    Rebuilt from the UsageRollup rows in the same transaction, so the two always agree;
    an account with 50 keys has about 50 times fewer rows here.
    """

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "granularity",
                    "bucket_start",
                    "account",
                    "endpoint",
                    "route",
                    "model",
                    "error_code",
                ],
                name="acct_account_rollup_unique",
            )
        ]
        indexes = [
            models.Index(
                fields=["account", "granularity", "bucket_start"],
                name="acct_arollup_account_bucket",
            ),
            models.Index(
                fields=["granularity", "bucket_start"], name="acct_arollup_bucket"
            ),
        ]


class AuditLog(models.Model):
    """An append-only record of a change to a key, plan or account (accounts M6)."""

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    actor_label = models.CharField(max_length=150)
    action = models.CharField(max_length=32, choices=AuditAction.choices)
    account = models.ForeignKey(
        Account, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    object_type = models.CharField(max_length=50)
    object_id = models.CharField(max_length=64)
    changes = models.JSONField(default=dict, blank=True)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["account", "at"], name="acct_audit_account_at")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.action} {self.object_type}:{self.object_id}"


def default_alert_thresholds() -> list[int]:
    """Percentages of each monthly quota at which an alert fires."""
    return [80, 95, 100]


def validate_thresholds(value: object) -> None:
    """A non-empty list of distinct integer percentages in 1–1000."""
    if (
        not isinstance(value, list)
        or not value
        or len(set(value)) != len(value)
        or not all(isinstance(v, int) and 1 <= v <= 1000 for v in value)
    ):
        raise ValidationError(
            "Enter distinct whole percentages between 1 and 1000.",
            code="invalid_thresholds",
        )


class QuotaAlertSettings(models.Model):
    """Where and when an account hears that its monthly quota runs low."""

    account = models.OneToOneField(
        Account, on_delete=models.PROTECT, related_name="alert_settings"
    )
    thresholds = models.JSONField(
        default=default_alert_thresholds, validators=[validate_thresholds]
    )
    email_enabled = models.BooleanField(default=True)
    emails = models.JSONField(
        default=list, blank=True, help_text="Empty: every member with an email."
    )
    webhook_url = models.URLField(max_length=500, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "quota alert settings"

    def __str__(self) -> str:
        return f"alerts of account {self.account_id}"


class QuotaAlert(models.Model):
    """One threshold crossed by one account's metric in one period: fired once."""

    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+")
    period = models.CharField(max_length=7)
    metric = models.CharField(max_length=20, choices=QuotaMetric.choices)
    threshold = models.PositiveSmallIntegerField()
    used = models.BigIntegerField()
    limit = models.BigIntegerField()
    fired_at = models.DateTimeField(default=timezone.now)
    email_sent_at = models.DateTimeField(null=True, blank=True)
    webhook_sent_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["account", "period", "metric", "threshold"],
                name="acct_quota_alert_once",
            )
        ]

    def __str__(self) -> str:
        return f"{self.account_id} {self.period} {self.metric} {self.threshold}%"
