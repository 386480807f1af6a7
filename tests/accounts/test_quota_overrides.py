"""Per-account quota overrides, top-ups and counter corrections (issue 32).

Admission applies the effective limit exactly like a plan's, on both limiter backends
(MemoryLimiter always, RedisLimiter under the ``redis`` marker); the limit of the moment
comes from the windows a principal carries; counters stay the sum of records plus
corrections.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from channels.db import database_sync_to_async
from django.core.exceptions import ValidationError
from django.db.models import Sum
from django.urls import reverse
from django.utils import timezone

from accounts.admission import admit
from accounts.exceptions import AdmissionDenied
from accounts.metering import UsageMeter
from accounts.models.accounts import Account
from accounts.models.audit import AuditLog
from accounts.models.quota import QuotaAdjustment, QuotaCounter, QuotaOverride
from accounts.models.usage import UsageRecord
from accounts.quota_limits import QuotaWindow, effective_limit
from accounts.selectors.quota import quota_bars
from accounts.services.quota import current_periods, quota_recount
from accounts.services.quota_overrides import (
    quota_counter_adjust,
    quota_override_create,
    quota_override_end,
)
from tests.support.quota_use import spend_tts_chars

from .conftest import bearer_scope

T0 = datetime(2026, 9, 10, tzinfo=UTC)
TTS = "tts_characters"


def window(kind: str, amount: int | None, start: int, end: int | None) -> QuotaWindow:
    return QuotaWindow(
        metric=TTS,
        kind=kind,
        amount=amount,
        starts_at=T0 + timedelta(days=start),
        ends_at=None if end is None else T0 + timedelta(days=end),
    )


def limit_at(windows: list[QuotaWindow], day: float, plan: int | None = 100) -> int:
    at = T0 + timedelta(days=day)
    return effective_limit(metric=TTS, plan_limit=plan, windows=windows, at=at).limit


def test_effective_limit_is_the_plan_or_newest_override_plus_top_ups_in_effect():
    windows = [
        window("top_up", 50, 0, 5),
        window("top_up", 20, 3, None),
        window("limit", 1000, 2, 4),
        window("limit", 500, 3, None),
        window("top_up", 30, 10, 12),  # not started yet on most days
    ]
    assert limit_at([], 1) == 100
    assert limit_at(windows, 1) == 150  # plan + first top-up
    assert limit_at(windows, 2) == 1050  # override 1000 + 50
    assert limit_at(windows, 3.5) == 570  # newest override 500 + 50 + 20
    assert limit_at(windows, 6) == 520  # first top-up ended
    assert limit_at(windows, 11) == 550
    assert limit_at([window("top_up", 50, 0, 5)], 1, plan=None) is None
    unlimited = [window("limit", None, 0, None), window("top_up", 50, 0, 5)]
    assert limit_at(unlimited, 1) is None


def invariant(account_id: int) -> tuple[int, int]:
    """(counter, records + corrections) of this month's TTS characters."""
    period = current_periods()[0]
    records = UsageRecord.objects.filter(account_id=account_id, period=period)
    corrections = QuotaAdjustment.objects.filter(
        account_id=account_id, period=period, metric=TTS
    )
    counter = QuotaCounter.objects.filter(
        account_id=account_id, period=period, metric=TTS
    ).first()
    total = (records.aggregate(n=Sum("tts_chars_in"))["n"] or 0) + (
        corrections.aggregate(n=Sum("amount"))["n"] or 0
    )
    return (counter.used if counter else 0), total


@pytest.mark.django_db(transaction=True)
async def test_overrides_top_ups_and_corrections_are_enforced_at_admission(
    backend, keyed
) -> None:
    api_key, raw = await keyed({"monthly_tts_characters": 100})
    account = await Account.objects.aget(pk=api_key.account_id)
    call = database_sync_to_async
    assert await spend_tts_chars(raw, 100) == "ok"
    assert (
        await spend_tts_chars(raw, 1) == "quota_exceeded"
    )  # admitted principal is now cached

    top_up = await call(quota_override_create)(
        account=account,
        metric=TTS,
        kind="top_up",
        amount=50,
        ends_at=timezone.now() + timedelta(days=1),
        reason="launch week",
        actor=None,
        actor_label="ops",
    )
    assert await spend_tts_chars(raw, 51) == "quota_exceeded"
    assert await spend_tts_chars(raw, 50) == "ok"
    assert await spend_tts_chars(raw, 1) == "quota_exceeded"

    await call(quota_override_create)(
        account=account,
        metric=TTS,
        kind="limit",
        amount=1000,
        ends_at=None,
        reason="enterprise trial",
        actor=None,
        actor_label="ops",
    )
    assert await spend_tts_chars(raw, 900) == "ok"  # 1000 + 50 - 150 = 900 left
    assert await spend_tts_chars(raw, 1) == "quota_exceeded"

    await call(quota_counter_adjust)(
        account=account,
        metric=TTS,
        period=current_periods()[0],
        amount=-40,
        reason="failed batch refunded",
        actor=None,
        actor_label="ops",
    )
    assert await spend_tts_chars(raw, 41) == "quota_exceeded"
    assert await spend_tts_chars(raw, 40) == "ok"

    await call(quota_override_end)(
        override=top_up, reason="launch over", actor=None, actor_label="ops"
    )
    assert await spend_tts_chars(raw, 1) == "quota_exceeded"  # 1090 used of 1000

    counter, total = await call(invariant)(account.pk)
    assert counter == total == 100 + 50 + 900 - 40 + 40
    assert await call(quota_recount)(periods=current_periods()) == 0
    actions = [
        a
        async for a in AuditLog.objects.filter(action__startswith="quota.")
        .order_by("id")
        .values_list("action", "object_type", "reason")
    ]
    assert actions == [
        ("quota.override_created", "quota_override", "launch week"),
        ("quota.override_created", "quota_override", "enterprise trial"),
        ("quota.adjusted", "quota_counter", "failed batch refunded"),
        ("quota.override_ended", "quota_override", "launch over"),
    ]


@pytest.mark.django_db(transaction=True)
async def test_a_running_stream_reserves_against_a_new_top_up(backend, keyed) -> None:
    """E6: a stream re-checks its key; the top-up's version bump reloads its windows."""
    api_key, raw = await keyed({"monthly_tts_characters": 10})
    account = await Account.objects.aget(pk=api_key.account_id)
    admission = await admit(bearer_scope(raw), endpoint="tts")
    meter = UsageMeter.for_admission(
        admission, endpoint="tts", request_id="r", model="m"
    )
    await meter.reserve_tts_chars(10)
    with pytest.raises(AdmissionDenied):
        await meter.reserve_tts_chars(5)
    await database_sync_to_async(quota_override_create)(
        account=account,
        metric=TTS,
        kind="top_up",
        amount=5,
        ends_at=timezone.now() + timedelta(hours=1),
        reason="r",
        actor=None,
        actor_label="ops",
    )
    assert await admission.still_valid()
    await meter.reserve_tts_chars(5)
    await meter.finish(status="cancelled")
    await admission.release()


@pytest.mark.django_db
def test_a_top_up_runs_out_at_its_end_without_a_reload(account) -> None:
    now = timezone.now()
    window_ = QuotaWindow(TTS, "top_up", 50, now - timedelta(hours=1), now)
    plan = effective_limit(metric=TTS, plan_limit=100, windows=[window_], at=now)
    assert plan.limit == 100 and plan.top_ups == ()
    before = now - timedelta(seconds=1)
    topped = effective_limit(metric=TTS, plan_limit=100, windows=[window_], at=before)
    assert topped.limit == 150 and topped.top_up_total == 50


@pytest.mark.django_db
def test_validation_of_overrides_and_corrections(account) -> None:
    now = timezone.now()
    base = {"account": account, "metric": TTS, "actor": None, "actor_label": "t"}
    with pytest.raises(ValidationError):  # a top-up needs an end
        quota_override_create(**base, kind="top_up", amount=5, ends_at=None, reason="r")
    with pytest.raises(ValidationError):  # and an amount
        quota_override_create(
            **base, kind="top_up", amount=None, ends_at=now + timedelta(1), reason="r"
        )
    with pytest.raises(ValidationError):  # a reason
        quota_override_create(**base, kind="limit", amount=5, ends_at=None, reason="  ")
    with pytest.raises(ValidationError):  # an end ahead
        quota_override_create(
            **base, kind="limit", amount=5, ends_at=now - timedelta(1), reason="r"
        )
    with pytest.raises(ValidationError):  # below 0
        quota_counter_adjust(
            **base, period=current_periods()[0], amount=-1, reason="refund"
        )
    first = quota_override_create(
        **base, kind="limit", amount=5, ends_at=None, reason="a"
    )
    second = quota_override_create(
        **base, kind="limit", amount=7, ends_at=None, reason="b"
    )
    first.refresh_from_db()
    assert first.ends_at is not None and not first.in_effect(timezone.now())
    assert second.in_effect(timezone.now())
    entry = AuditLog.objects.filter(object_id=str(second.pk)).get()
    assert entry.changes["replaces"] == [None, [first.pk]]
    quota_override_end(override=second, reason="done", actor=None, actor_label="t")
    with pytest.raises(ValidationError):
        quota_override_end(override=second, reason="again", actor=None, actor_label="t")
    assert not QuotaOverride.objects.filter(ends_at__isnull=True).exists()


@pytest.mark.django_db
def test_dashboard_shows_the_effective_limit_and_where_it_comes_from(
    client, django_user_model, account, plan
) -> None:
    plan.monthly_tts_characters = 1000
    plan.monthly_asr_seconds = 60
    plan.save()
    account = Account.objects.select_related("plan").get(pk=account.pk)
    now = timezone.now()
    quota_override_create(
        account=account,
        metric=TTS,
        kind="top_up",
        amount=500,
        ends_at=now + timedelta(days=3),
        reason="r",
        actor=None,
        actor_label="t",
    )
    quota_override_create(
        account=account,
        metric="asr_audio_ms",
        kind="limit",
        amount=120,
        ends_at=None,
        reason="r",
        actor=None,
        actor_label="t",
    )
    bars = {bar.metric: bar for bar in quota_bars(account=account, now=timezone.now())}
    tts, asr = bars[TTS], bars["asr_audio_ms"]
    assert tts.limit == 1500 and tts.source.startswith(f"plan {plan.name} + 500 top-up")
    assert asr.limit == 120
    assert asr.source == f"account override 120 (plan {plan.name}: 60)"
    member = django_user_model.objects.create_user("m", "m@example.com", "pw")
    account.members.add(member)
    client.force_login(member)
    html = client.get(reverse("dashboard:usage", args=[account.slug])).content.decode()
    assert 'data-limit="1500"' in html and tts.source in html
    assert asr.source in html
