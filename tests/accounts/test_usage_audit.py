"""``manage.py usage_audit`` and the periodic audit (issue 30 item 6): records, quota
counters and the hourly and daily rollups compared for a range, drift printed, exit 1."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db.models import F
from django.utils import timezone
from prometheus_client import REGISTRY

from accounts import tasks
from accounts.models.quota import QuotaCounter
from accounts.models.rollups import AccountRollup, UsageRollup
from accounts.models.usage import UsageRecord

from .rollup_data import random_records

pytestmark = pytest.mark.django_db


@pytest.fixture
def keys(make_key, plan):
    from accounts.services.accounts import account_get_or_create

    other = account_get_or_create(name="Other", plan=plan)
    return [make_key()[0], make_key()[0], make_key(account=other)[0]]


def audit(*args: str) -> tuple[bool, str]:
    out = StringIO()
    try:
        call_command("usage_audit", *args, stdout=out)
    except CommandError as error:
        return False, out.getvalue() + str(error)
    return True, out.getvalue()


def test_drift_is_printed_then_fixed_then_clean(keys) -> None:
    now = timezone.now()
    since = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    # Written behind the services' back: no quota counter and no rollup knows them.
    UsageRecord.objects.bulk_create(
        random_records(keys, since=since, hours=3, count=60)
    )
    clean, out = audit("--since", since.isoformat())
    assert not clean
    kinds = {line.split()[0] for line in out.splitlines() if line[:1].isalpha()}
    assert {"quota", "hourly"} <= kinds
    clean, out = audit("--since", since.isoformat(), "--fix")
    assert clean, out
    assert "usage audit clean" in out
    # One rollup row off by 7 characters: found, by kind and row.
    row = UsageRollup.objects.filter(granularity="hour", tts_chars_in__gt=0).first()
    UsageRollup.objects.filter(pk=row.pk).update(tts_chars_in=F("tts_chars_in") + 7)
    clean, out = audit("--since", since.isoformat())
    assert not clean
    lines = [line for line in out.splitlines() if "tts_chars_in" in line]
    assert any(line.startswith("hourly ") and "(+7)" in line for line in lines)
    assert any(line.startswith("daily ") and "(-7)" in line for line in lines)
    assert any(line.startswith("account ") and "(-7)" in line for line in lines)
    counter = QuotaCounter.objects.first()
    QuotaCounter.objects.filter(pk=counter.pk).update(used=F("used") + 1)
    assert "quota " in audit("--since", since.isoformat())[1]
    assert audit("--since", since.isoformat(), "--fix")[0]


def test_a_stuck_started_record_is_drift(keys) -> None:
    since = timezone.now() - timedelta(hours=1)
    (record,) = random_records(keys[:1], since=since, hours=1, count=1)
    record.status, record.ended_at = "started", None
    record.last_checkpoint_at = timezone.now() - timedelta(minutes=10)
    UsageRecord.objects.bulk_create([record])
    clean, out = audit("--since", since.isoformat())
    assert not clean and "stuck records started: count stored 1" in out
    assert audit("--since", since.isoformat(), "--fix")[0]  # the reaper settles it
    assert UsageRecord.objects.get(pk=record.pk).status == "abandoned"


def test_the_periodic_audit_exports_its_drift_as_a_gauge(keys) -> None:
    since = timezone.now() - timedelta(hours=2)
    UsageRecord.objects.bulk_create(
        random_records(keys, since=since, hours=2, count=20)
    )
    found = tasks.audit_usage()
    assert found > 0
    assert REGISTRY.get_sample_value("veena_usage_drift", {"kind": "quota"}) > 0
    stamp = REGISTRY.get_sample_value("veena_usage_audit_timestamp_seconds")
    assert stamp == pytest.approx(timezone.now().timestamp(), abs=60)
    audit("--since", (since - timedelta(hours=1)).isoformat(), "--fix")
    assert tasks.audit_usage() == 0
    assert REGISTRY.get_sample_value("veena_usage_drift", {"kind": "quota"}) == 0
    assert not AccountRollup.objects.filter(requests__lt=0).exists()
