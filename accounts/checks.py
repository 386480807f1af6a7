"""System checks for the accounts settings (accounts §12), registered in ``ready()``."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register

from accounts.client_secrets import MAX_TTL_SECONDS, MIN_TTL_SECONDS


@register()
def lease_renewal_fits_ttl(**kwargs: Any) -> list[CheckMessage]:
    """E002: a lease is renewed at least three times per TTL (C2, C4)."""
    if settings.LEASE_RENEW_SECONDS > settings.LEASE_TTL_SECONDS / 3:
        return [
            Error(
                "LEASE_RENEW_SECONDS must be at most LEASE_TTL_SECONDS / 3",
                id="accounts.E002",
            )
        ]
    return []


@register()
def retention_outlives_rollups(**kwargs: Any) -> list[CheckMessage]:
    """E003: records outlive the rollup lookback window that rebuilds from them (G4)."""
    if settings.USAGE_RECORD_RETENTION_DAYS * 24 <= settings.ROLLUP_LOOKBACK_HOURS:
        return [
            Error(
                "USAGE_RECORD_RETENTION_DAYS must exceed ROLLUP_LOOKBACK_HOURS",
                id="accounts.E003",
            )
        ]
    return []


@register()
def memory_limiter_in_production(**kwargs: Any) -> list[CheckMessage]:
    """W001: without REDIS_URL, limits hold for this process only (B2)."""
    if not settings.REDIS_URL and not settings.DEBUG:
        return [
            Warning(
                "REDIS_URL is unset: rate, concurrency and quota limits are enforced per "
                "process (MemoryLimiter). Set REDIS_URL when running more than one.",
                id="accounts.W001",
            )
        ]
    return []


@register()
def playground_token_ttl_in_range(**kwargs: Any) -> list[CheckMessage]:
    """E004: a playground client secret lives 10 s to 2 h, as any client secret."""
    if not MIN_TTL_SECONDS <= settings.PLAYGROUND_TOKEN_TTL_SECONDS <= MAX_TTL_SECONDS:
        return [
            Error(
                f"PLAYGROUND_TOKEN_TTL_SECONDS must be between {MIN_TTL_SECONDS} and "
                f"{MAX_TTL_SECONDS}",
                id="accounts.E004",
            )
        ]
    return []
