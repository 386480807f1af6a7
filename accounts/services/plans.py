"""The default plan, which both account writes and the built-in keys' accounts start on."""

from __future__ import annotations

from django.conf import settings

from accounts.models.plans import Plan, default_allowed_endpoints


def plan_get_or_create_default() -> Plan:
    """The plan new accounts get: generous limits, no quota, every endpoint."""
    plan, _ = Plan.objects.get_or_create(
        name=settings.DEFAULT_PLAN_NAME,
        defaults={
            "requests_per_minute": 600,
            "max_concurrent_streams": 16,
            "monthly_tts_characters": None,
            "monthly_asr_seconds": None,
            "max_session_seconds": 3600,
            "allowed_endpoints": default_allowed_endpoints(),
        },
    )
    return plan
