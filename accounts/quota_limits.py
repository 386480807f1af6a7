"""The effective monthly limit of one metric: the plan's or an override's, plus top-ups.

Pure functions over plain values, so admission (from the windows a principal carries, A1)
and the dashboard, alerts and admin (from the database) compute the same limit. Amounts
are stored units: characters, or milliseconds of ASR audio (Q1, Q2).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from accounts.models.choices import QuotaMetric, QuotaOverrideKind, stored_units


@dataclass(frozen=True)
class QuotaWindow:
    """One override or top-up of one metric, in effect over ``[starts_at, ends_at)``."""

    metric: str
    kind: str
    # Stored units; None only for a limit, where it means unlimited.
    amount: int | None
    starts_at: datetime
    ends_at: datetime | None

    def in_effect(self, at: datetime) -> bool:
        """Whether the window covers ``at``."""
        return self.starts_at <= at and (self.ends_at is None or at < self.ends_at)


@dataclass(frozen=True)
class EffectiveLimit:
    """A metric's limit at one moment, and what it is made of."""

    metric: str
    # None: unlimited.
    limit: int | None
    plan_limit: int | None
    # The limit override in effect (the newest, when several overlap), if any.
    override: QuotaWindow | None
    top_ups: tuple[QuotaWindow, ...]

    @property
    def top_up_total(self) -> int:
        """What the top-ups in effect add (nothing when the base is unlimited)."""
        return sum(w.amount or 0 for w in self.top_ups)


def plan_limit(
    metric: str, *, tts_characters: int | None, asr_seconds: int | None
) -> int | None:
    """A plan's monthly limit of ``metric`` in stored units, or None: unlimited (Q2)."""
    if metric == QuotaMetric.TTS_CHARACTERS:
        return tts_characters
    return None if asr_seconds is None else stored_units(metric, asr_seconds)


def effective_limit(
    *,
    metric: str,
    plan_limit: int | None,
    windows: Iterable[QuotaWindow],
    at: datetime,
) -> EffectiveLimit:
    """The limit of ``metric`` at ``at``: an override's in place of the plan's, plus every
    top-up in effect. An unlimited base stays unlimited."""
    active = [w for w in windows if w.metric == metric and w.in_effect(at)]
    limits = [w for w in active if w.kind == QuotaOverrideKind.LIMIT]
    override = max(limits, key=lambda w: w.starts_at, default=None)
    base = plan_limit if override is None else override.amount
    top_ups = tuple(w for w in active if w.kind == QuotaOverrideKind.TOP_UP)
    if base is None:
        return EffectiveLimit(metric, None, plan_limit, override, ())
    total = base + sum(w.amount or 0 for w in top_ups)
    return EffectiveLimit(metric, total, plan_limit, override, top_ups)
