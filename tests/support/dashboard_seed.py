"""Known usage around the 2026 US DST change, for the dashboard's page, CSV and API tests.

America/New_York moved from -05:00 to -04:00 at 2026-03-08 07:00 UTC, so its 8 March has
23 hours: [05:00Z, 04:00Z next day). Records sit on both sides of both local midnights,
so UTC days and New York days hold different sums, and B's usage must never show for A.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from accounts import histogram
from accounts.models.accounts import Account
from accounts.models.api_keys import ApiKey
from accounts.models.plans import Plan
from accounts.models.quota import QuotaCounter
from accounts.models.usage import UsageRecord
from accounts.services.api_keys import api_key_create
from accounts.services.quota import period_of
from accounts.services.rollups import usage_rollup

PASSWORD = "correct-horse-battery"
FIRST, LAST = "2026-03-07", "2026-03-09"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# (key, started_at, route, model, status, error_code, tts chars, audio ms, ttfb, asr latencies)
RECORDS_A = [
    (
        "prod",
        "2026-03-08T04:30",
        "tts_ws",
        "piper",
        "completed",
        "",
        100,
        2_000,
        120,
        [],
    ),
    (
        "prod",
        "2026-03-08T05:30",
        "tts_ws",
        "piper",
        "completed",
        "",
        200,
        4_000,
        180,
        [],
    ),
    (
        "staging",
        "2026-03-08T12:10",
        "tts_ws",
        "piper",
        "failed",
        "inference_failed",
        40,
        0,
        None,
        [],
    ),
    (
        "staging",
        "2026-03-09T03:30",
        "tts_rest",
        "piper",
        "completed",
        "",
        300,
        6_500,
        900,
        [],
    ),
    (
        "prod",
        "2026-03-09T04:30",
        "asr_realtime",
        "whisper-tiny.en",
        "completed",
        "",
        0,
        5_000,
        None,
        [300, 700],
    ),
    (
        "prod",
        "2026-03-09T09:00",
        "asr_realtime",
        "whisper-tiny.en",
        "abandoned",
        "",
        0,
        1_500,
        None,
        [],
    ),
]
RECORDS_B = [
    (
        "beta-key",
        "2026-03-08T10:00",
        "tts_ws",
        "piper",
        "completed",
        "",
        7_777,
        9_000,
        150,
        [],
    ),
]


@dataclass
class Seeded:
    """What ``seed`` made: the two accounts, their keys by name, and the people."""

    a: Account
    b: Account
    keys: dict[str, ApiKey]
    alice: Any
    bob: Any
    staff: Any


def _record(key: ApiKey, row: tuple[Any, ...]) -> UsageRecord:
    _, started, route, model, status, code, chars, audio_ms, ttfb, latencies = row
    start = at(started)
    tts = route != "asr_realtime"
    hist = histogram.empty()
    for latency in latencies:
        histogram.observe(hist, latency)
    return UsageRecord(
        id=uuid.uuid4(),
        stream_id=uuid.uuid4(),
        request_id=f"req-{uuid.uuid4().hex[:8]}",
        account_id=key.account_id,
        api_key=key,
        endpoint="tts" if tts else "asr",
        route=route,
        model=model,
        status=status,
        error_code=code,
        started_at=start,
        ended_at=start + timedelta(seconds=3),
        last_checkpoint_at=start + timedelta(seconds=3),
        period=period_of(start),
        instance="seed:1",
        tts_chars_in=chars,
        tts_audio_out_ms=audio_ms if tts else 0,
        ttfb_ms=ttfb,
        rtf=0.5 if tts and audio_ms else None,
        asr_audio_in_ms=0 if tts else audio_ms,
        asr_chars_out=0 if tts else 42,
        asr_items=len(latencies),
        asr_latency_ms_sum=sum(latencies),
        asr_latency_ms_max=max(latencies, default=0),
        asr_latency_hist=hist if latencies else [],
    )


def seed(*, now: datetime) -> Seeded:
    """Accounts A (members: alice) and B (bob), a staff user, records and rollups."""
    from django.contrib.auth.models import User

    plan = Plan.objects.create(
        name=f"seed-{uuid.uuid4().hex[:6]}",
        requests_per_minute=100,
        max_concurrent_streams=5,
        monthly_tts_characters=10_000,
        monthly_asr_seconds=3_600,
        max_session_seconds=600,
    )
    a = Account.objects.create(name="Acme", slug="acme", plan=plan)
    b = Account.objects.create(name="Beta", slug="beta", plan=plan)
    keys = {}
    for account, name in ((a, "prod"), (a, "staging"), (b, "beta-key")):
        keys[name], _ = api_key_create(
            account=account, name=name, actor=None, actor_label="seed"
        )
    alice = User.objects.create_user("alice", "alice@example.com", PASSWORD)
    bob = User.objects.create_user("bob", "bob@example.com", PASSWORD)
    staff = User.objects.create_user("staff", "staff@example.com", PASSWORD)
    staff.is_staff = True
    staff.save(update_fields=["is_staff"])
    a.members.add(alice)
    b.members.add(bob)
    rows = [(keys[r[0]], r) for r in RECORDS_A + RECORDS_B]
    UsageRecord.objects.bulk_create([_record(key, row) for key, row in rows])
    # The seeded days (around the March DST change) may lie past the record retention of
    # today's date, where a rollup keeps what it cannot rebuild; these records are all here.
    since, until = at("2026-03-06T00:00"), at("2026-03-11T00:00")
    retention = (timezone.now() - since).days + 1
    with override_settings(
        USAGE_RECORD_RETENTION_DAYS=max(retention, settings.USAGE_RECORD_RETENTION_DAYS)
    ):
        usage_rollup(granularity="hour", since=since, until=until)
        usage_rollup(granularity="day", since=since, until=until)
    QuotaCounter.objects.create(
        account=a, period=period_of(now), metric="tts_characters", used=8_500
    )
    return Seeded(a=a, b=b, keys=keys, alice=alice, bob=bob, staff=staff)
