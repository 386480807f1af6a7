"""This month's quota use per limited metric, from QuotaCounter (the authority, Q3), against
the effective limit: the plan's, or the account's override, plus top-ups
(``accounts.quota_limits``).

The forecast projects the month-to-date rate to the end of the month: used × month length
÷ time elapsed. It is a straight line, so it says when the limit would be reached at the
current pace, not what will happen.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q

from accounts.models.accounts import Account
from accounts.models.choices import (
    QUOTA_UNITS,
    QuotaMetric,
    operator_units,
    stored_units,
)
from accounts.models.quota import QuotaCounter, QuotaOverride
from accounts.quota_limits import (
    EffectiveLimit,
    QuotaWindow,
    effective_limit,
    plan_limit,
)
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
    # Where the limit comes from: the plan, an override, top-ups.
    source: str = ""

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


def window_of(override: QuotaOverride) -> QuotaWindow:
    """An override as the window admission and the selectors compute with."""
    amount = override.amount
    return QuotaWindow(
        metric=override.metric,
        kind=override.kind,
        amount=None if amount is None else stored_units(override.metric, amount),
        starts_at=override.starts_at,
        ends_at=override.ends_at,
    )


def quota_windows(*, account_id: int, now: datetime) -> tuple[QuotaWindow, ...]:
    """The account's overrides and top-ups that are in effect or still to come (one query)."""
    rows = QuotaOverride.objects.filter(
        Q(ends_at__isnull=True) | Q(ends_at__gt=now), account_id=account_id
    ).order_by("starts_at", "pk")
    return tuple(window_of(row) for row in rows)


def effective_limits(*, account: Account, now: datetime) -> dict[str, EffectiveLimit]:
    """Each metric's limit at ``now`` and what it is made of (the plan is joined)."""
    windows = quota_windows(account_id=account.pk, now=now)
    return {
        metric: effective_limit(
            metric=metric,
            plan_limit=plan_limit(
                metric,
                tts_characters=account.plan.monthly_tts_characters,
                asr_seconds=account.plan.monthly_asr_seconds,
            ),
            windows=windows,
            at=now,
        )
        for metric in QuotaMetric.values
    }


def limit_source(limit: EffectiveLimit, *, plan_name: str) -> str:
    """Where a limit comes from, in the metric's display unit, e.g. "plan Pro + 5,000
    top-up until 2026-10-01 00:00 UTC"."""
    metric = limit.metric

    def units(stored: int | None) -> str:
        return "unlimited" if stored is None else f"{operator_units(metric, stored):,}"

    if limit.override is None:
        parts = [f"plan {plan_name}"]
    else:
        parts = [f"account override {units(limit.override.amount)}"]
        parts[0] += f" (plan {plan_name}: {units(limit.plan_limit)})"
    for top_up in limit.top_ups:
        until = top_up.ends_at
        when = "" if until is None else f" until {until:%Y-%m-%d %H:%M} UTC"
        parts.append(f"{units(top_up.amount)} top-up{when}")
    return " + ".join(parts)


def limit_text(limit: EffectiveLimit, *, plan_name: str) -> str:
    """The limit in its display unit and where it comes from: "15,000 characters (plan
    Pro + 5,000 top-up until …)", or "unlimited (plan Pro)"."""
    metric = limit.metric
    source = limit_source(limit, plan_name=plan_name)
    if limit.limit is None:
        return f"unlimited ({source})"
    amount = operator_units(metric, limit.limit)
    return f"{amount:,} {QUOTA_UNITS[metric][0]} ({source})"


def forecast(used: int, *, now: datetime) -> tuple[int, float]:
    """The month-end projection of ``used`` and the rate per second it assumes."""
    start, end = month_bounds(now)
    # At least a day: a busy first hour of the month says little about the month.
    elapsed = max((now - start).total_seconds(), 86_400.0)
    rate = used / elapsed
    return int(used + rate * max((end - now).total_seconds(), 0.0)), rate


def quota_bars(*, account: Account, now: datetime) -> list[QuotaBar]:
    """One bar per limited metric for this month, in display units (characters, seconds)."""
    effective = effective_limits(account=account, now=now)
    limits = {m: e.limit for m, e in effective.items() if e.limit is not None}
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
        bars.append(
            QuotaBar(
                metric=metric,
                label=LABELS[QuotaMetric(metric)],
                used=operator_units(metric, value),
                limit=operator_units(metric, limit),
                forecast=operator_units(metric, projected),
                reaches_limit_at=reaches if reaches is None or reaches < end else None,
                source=limit_source(effective[metric], plan_name=account.plan.name),
            )
        )
    return bars
