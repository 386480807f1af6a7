"""The vocabulary of the accounts models: endpoints, routes, statuses and kinds."""

from __future__ import annotations

from django.db import models


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
