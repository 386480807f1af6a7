"""A plan: the limits shared by every account on it."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from accounts.models.choices import Endpoint


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
        stale = settings.USAGE_STALE_SECONDS
        lookback = settings.ROLLUP_LOOKBACK_HOURS * 3600
        if self.max_session_seconds is not None and (
            self.max_session_seconds + stale + 600 > lookback
        ):
            raise ValidationError(
                {
                    "max_session_seconds": "Too long for ROLLUP_LOOKBACK_HOURS (accounts M2)."
                }
            )
