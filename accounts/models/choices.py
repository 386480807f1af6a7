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
