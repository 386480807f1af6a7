"""This month's quota use per limited metric, from QuotaCounter (the authority, Q3).

The forecast projects the month-to-date rate to the end of the month: used × month length
÷ time elapsed. It is a straight line, so it says when the limit would be reached at the
current pace, not what will happen.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from accounts.models.accounts import Account
from accounts.models.choices import QuotaMetric
from accounts.models.quota import QuotaCounter
from accounts.services.quota import period_of, period_start

LABELS = {
    QuotaMetric.TTS_CHARACTERS: "TTS characters",
    QuotaMetric.ASR_AUDIO_MS: "ASR audio seconds",
}


@dataclass(frozen=True)
class QuotaBar:
    """One limited metric: used and limit in its display unit, plus the forecast."""

    metric: str
    label: str
    used: int
    limit: int
    forecast: int
    reaches_limit_at: datetime | None

    @property
    def percent(self) -> float:
        """Share of the limit used, in percent (may exceed 100)."""
        return 100.0 * self.used / self.limit if self.limit else 100.0

    @property
    def forecast_percent(self) -> float:
        """The forecast as a share of the limit."""
        return 100.0 * self.forecast / self.limit if self.limit else 100.0


def month_bounds(now: datetime) -> tuple[datetime, datetime]:
    """``[start, end)`` of the UTC month that contains ``now``."""
    start = period_start(period_of(now))
    following = (start + timedelta(days=32)).replace(day=1)
    return start, following


def plan_limits(account: Account) -> dict[str, int]:
    """The account's monthly limits in stored units (ms for ASR), limited metrics only."""
    plan = account.plan
    limits: dict[str, int] = {}
    if plan.monthly_tts_characters is not None:
        limits[QuotaMetric.TTS_CHARACTERS] = plan.monthly_tts_characters
    if plan.monthly_asr_seconds is not None:
        limits[QuotaMetric.ASR_AUDIO_MS] = plan.monthly_asr_seconds * 1000
    return limits


def forecast(used: int, *, now: datetime) -> tuple[int, float]:
    """The month-end projection of ``used`` and the rate per second it assumes."""
    start, end = month_bounds(now)
    # At least a day: a busy first hour of the month says little about the month.
    elapsed = max((now - start).total_seconds(), 86_400.0)
    rate = used / elapsed
    return int(used + rate * max((end - now).total_seconds(), 0.0)), rate


def quota_bars(*, account: Account, now: datetime) -> list[QuotaBar]:
    """One bar per limited metric for this month, in display units (characters, seconds)."""
    limits = plan_limits(account)
    if not limits:
        return []
    used = dict(
        QuotaCounter.objects.filter(
            account=account, period=period_of(now), metric__in=list(limits)
        ).values_list("metric", "used")
    )
    _, end = month_bounds(now)
    bars = []
    for metric, limit in limits.items():
        value = used.get(metric, 0)
        projected, rate = forecast(value, now=now)
        reaches = None
        if value >= limit:
            reaches = now
        elif rate > 0 and projected >= limit:
            reaches = now + timedelta(seconds=(limit - value) / rate)
        scale = 1000 if metric == QuotaMetric.ASR_AUDIO_MS else 1
        bars.append(
            QuotaBar(
                metric=metric,
                label=LABELS[QuotaMetric(metric)],
                used=value // scale,
                limit=limit // scale,
                forecast=projected // scale,
                reaches_limit_at=reaches if reaches is None or reaches < end else None,
            )
        )
    return bars
