"""The vocabulary of the accounts models: endpoints, routes, statuses and kinds."""

from __future__ import annotations

from django.db import models


class Endpoint(models.TextChoices):
    """A public streaming endpoint."""

    TTS = "tts", "TTS"
    ASR = "asr", "ASR"


class Route(models.TextChoices):
    """What was called: the public route a request came in on (docs/accounting.md)."""

    TTS_WS = "tts_ws", "TTS WebSocket"
    TTS_REST = "tts_rest", "TTS REST"
    SPEECH_REST = "speech_rest", "Speech REST"
    ASR_REALTIME = "asr_realtime", "Realtime ASR"
    ASR_REST = "asr_rest", "File transcription"


ROUTE_MAX_LENGTH = 16


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

    TTS_CHARACTERS = "tts_characters", "TTS characters"
    ASR_AUDIO_MS = "asr_audio_ms", "ASR audio"


# What operators type and read per metric (a plan's limits, overrides, top-ups and counter
# adjustments), and how many stored units (characters, milliseconds) one of it is.
QUOTA_UNITS: dict[str, tuple[str, int]] = {
    QuotaMetric.TTS_CHARACTERS: ("characters", 1),
    QuotaMetric.ASR_AUDIO_MS: ("seconds", 1000),
}


def stored_units(metric: str, amount: int) -> int:
    """``amount`` in the operator's unit of ``metric`` as stored units (ASR: ms)."""
    return amount * QUOTA_UNITS[metric][1]


def operator_units(metric: str, stored: int) -> int:
    """Stored units of ``metric`` in the operator's unit, rounded down (ASR: seconds)."""
    return stored // QUOTA_UNITS[metric][1]


class QuotaOverrideKind(models.TextChoices):
    """What a quota override does to an account's monthly limit of one metric."""

    LIMIT = "limit", "Monthly limit (in place of the plan's)"
    TOP_UP = "top_up", "Top-up (extra units on top of the limit)"


class AuditAction(models.TextChoices):
    """What an AuditLog row records."""

    KEY_CREATED = "key.created", "Key created"
    KEY_REVOKED = "key.revoked", "Key revoked"
    KEY_LIMITS_CHANGED = "key.limits_changed", "Key limits changed"
    KEY_UPDATED = "key.updated", "Key updated"
    PLAN_CREATED = "plan.created", "Plan created"
    PLAN_CHANGED = "plan.changed", "Plan changed"
    ACCOUNT_CREATED = "account.created", "Account created"
    ACCOUNT_CHANGED = "account.changed", "Account changed"
    MEMBERS_CHANGED = "account.members_changed", "Membership changed"
    QUOTA_OVERRIDE_CREATED = "quota.override_created", "Quota override created"
    QUOTA_OVERRIDE_ENDED = "quota.override_ended", "Quota override ended"
    QUOTA_ADJUSTED = "quota.adjusted", "Quota counter adjusted"
    ALERTS_CHANGED = "alerts.changed", "Alert settings changed"
    WEBHOOK_SECRET_ROTATED = "webhook.secret_rotated", "Webhook secret rotated"


class WebhookStatus(models.TextChoices):
    """Where one webhook delivery stands."""

    PENDING = "pending", "Pending (retrying)"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed (gave up)"


class KeyKind(models.TextChoices):
    """What a key is for: a customer's own key, or an account's playground key."""

    STANDARD = "standard"
    # Never handed out: the browser playground's client secrets are minted from it, so
    # its usage shows as "playground" (accounts.services.playground).
    PLAYGROUND = "playground"


class SecretUse(models.TextChoices):
    """The one socket a client secret opens (accounts.client_secrets)."""

    REALTIME = "realtime", "Realtime ASR"
    TTS = "tts", "TTS WebSocket"


class KeyStatus(models.TextChoices):
    """The state of an ApiKey, derived from its timestamps."""

    ACTIVE = "active"
    EXPIRED = "expired"
    REVOKED = "revoked"
