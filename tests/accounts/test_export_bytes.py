"""The CSV export, byte for byte, against the same file computed here from the records
(accounts D7): its own bucketing, sums, sorting, quoting and number formats, in UTC, New
York across its DST change and Kolkata (+05:30), by hour and by day, with a key and a model
whose cells need quoting or would run as formulas, rows of one cell split by error code,
and the current, partial hour."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from accounts.models.usage import UsageRecord
from accounts.services.api_keys import api_key_create
from accounts.services.rollups import usage_rollup
from tests.accounts.test_dashboard import login
from tests.support.dashboard_seed import FIRST, LAST, _record, seed

pytestmark = pytest.mark.django_db

HEADER = (
    "bucket_start,bucket_end,granularity,partial,api_key_id,key,key_name,route,model,"
    "requests,completed,cancelled,failed,abandoned,errors,tts_characters,"
    "tts_audio_seconds,asr_audio_seconds,asr_characters,avg_ttfb_ms,avg_asr_latency_ms"
)
STATUSES = ("completed", "cancelled", "failed", "abandoned")


def formula_safe(text: str) -> str:
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def day_starts(first: date, last: date, tz: ZoneInfo) -> list[datetime]:
    """Each local midnight from ``first`` to the day after ``last``, moved back to the
    start of its UTC hour (a +05:30 midnight belongs to the hour it falls in)."""
    starts = []
    for n in range((last - first).days + 2):
        midnight = datetime.combine(first + timedelta(days=n), datetime.min.time(), tz)
        starts.append(midnight.astimezone(UTC).replace(minute=0))
    return starts


def expected_csv(
    records: list[UsageRecord], first: date, last: date, tz: ZoneInfo, width: str
) -> str:
    now = datetime.now(UTC)
    edges = day_starts(first, last, tz)
    if width == "hour":
        hours = int((edges[-1] - edges[0]).total_seconds() // 3600)
        edges = [edges[0] + timedelta(hours=n) for n in range(hours + 1)]
    buckets = [(a, b) for a, b in zip(edges, edges[1:], strict=False) if a <= now]
    sums: dict[int, dict[tuple[Any, ...], list[int]]] = defaultdict(dict)
    for r in records:
        hour = r.started_at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        at = [i for i, (a, b) in enumerate(buckets) if a <= hour < b]
        if not at or r.status == "started":
            continue
        cell = sums[at[0]].setdefault((r.api_key, r.route, r.model), [0] * 13)
        n = r.requests
        counts = [n if r.status == s else 0 for s in STATUSES]
        ttfb = [r.ttfb_ms or 0, 0 if r.ttfb_ms is None else 1]
        values = [n, *counts, r.tts_chars_in, r.tts_audio_out_ms, r.asr_audio_in_ms]
        values += [r.asr_chars_out, *ttfb, r.asr_latency_ms_sum, r.asr_items]
        cell[:] = [a + b for a, b in zip(cell, values, strict=True)]
    out = io.StringIO()
    writer = csv.writer(out)
    out.write(HEADER + "\r\n")
    for i, (start, end) in enumerate(buckets):
        times = [
            start.astimezone(tz).isoformat(),
            end.astimezone(tz).isoformat(),
            width,
            "true" if end > now else "false",
        ]
        if not sums[i]:
            writer.writerow([*times, "", "", "", "", "", *cells([0] * 13)])
        lines = [
            [
                *times,
                str(key.id),
                formula_safe(key.display),
                formula_safe(key.name),
                route,
                formula_safe(model),
                *cells(values),
            ]
            for (key, route, model), values in sums[i].items()
        ]
        writer.writerows(sorted(lines, key=lambda line: (line[5], line[7], line[8])))
    return out.getvalue()


def cells(v: list[int]) -> list[Any]:
    """The measure columns: counts, errors, characters, seconds to the millisecond,
    averages to a tenth (empty when nothing was measured)."""
    average = [
        f"{v[9] / v[10]:.1f}" if v[10] else "",
        f"{v[11] / v[12]:.1f}" if v[12] else "",
    ]
    return [
        *v[:5],
        v[3] + v[4],
        v[5],
        f"{v[6] / 1000:.3f}",
        f"{v[7] / 1000:.3f}",
        v[8],
        *average,
    ]


def test_the_csv_is_byte_for_byte_the_records_sums() -> None:
    seeded = seed(now=timezone.now())
    odd, _ = api_key_create(
        account=seeded.a, name='=ops, "night"', actor=None, actor_label="t"
    )
    now = timezone.now()
    hour = now.strftime("%Y-%m-%dT%H:00")
    prod = seeded.keys["prod"]
    # One cell in three rollup rows (error codes), a model that needs quoting, an ASR
    # record in Kolkata's next day, and one in the current (partial) hour.
    extra = [
        (odd, ("x", "2026-03-08T06:10", "tts_ws", '-m,"1"', "failed", "worker_lost", 7, 900, 120, [])),
        (odd, ("x", "2026-03-08T06:20", "tts_ws", '-m,"1"', "failed", "inference_failed", 5, 300, None, [])),
        (odd, ("x", "2026-03-08T06:50", "tts_ws", '-m,"1"', "completed", "", 11, 1234, 95, [])),
        (prod, ("x", "2026-03-08T18:40", "asr_realtime", "whisper-tiny.en", "completed", "", 0, 3_333, None, [250, 333])),
        (prod, ("x", hour, "tts_rest", "piper", "completed", "", 9, 500, 77, [])),
    ]  # fmt: skip
    UsageRecord.objects.bulk_create([_record(key, row) for key, row in extra])
    since = datetime(2026, 3, 6, tzinfo=UTC)
    retention = (now - since).days + 1
    with override_settings(
        USAGE_RECORD_RETENTION_DAYS=max(retention, settings.USAGE_RECORD_RETENTION_DAYS)
    ):
        for granularity in ("hour", "day"):
            usage_rollup(
                granularity=granularity, since=since, until=now + timedelta(days=1)
            )
    records = list(
        UsageRecord.objects.filter(account=seeded.a).select_related("api_key")
    )
    client = login(seeded.alice)
    url = reverse("dashboard:usage_csv", args=["acme"])
    today = now.date()
    ranges = [(date.fromisoformat(FIRST), date.fromisoformat(LAST))]
    ranges.append((today - timedelta(days=1), today))
    bodies = {}
    for first, last in ranges:
        for name in ("UTC", "America/New_York", "Asia/Kolkata"):
            for width in ("hour", "day"):
                query = f"?from={first}&to={last}&tz={name}&granularity={width}"
                response = client.get(url + query)
                body = b"".join(response.streaming_content).decode()
                expected = expected_csv(records, first, last, ZoneInfo(name), width)
                assert body == expected, query
                bodies[query] = body
    march = bodies[f"?from={FIRST}&to={LAST}&tz=UTC&granularity=hour"]
    # Quoted, and no formula (the test's own rules; its expected file agrees).
    assert ',"\'=ops, ""night""",tts_ws,"\'-m,""1""",3,1,0,2,0,2,23,2.434,' in march
