"""Times in the zone the page names (issue 30 item 2): the requests page and the CSV in UTC,
New York across its 2026-03-08 DST change, and Kolkata (+05:30), on the seeded records."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.accounts.test_dashboard import login
from tests.support.dashboard_seed import seed

pytestmark = pytest.mark.django_db

# The seeded records of account A (UTC) as each zone names them: both sides of New York's
# change from EST (-05:00) to EDT (-04:00) at 07:00Z.
EXPECTED_STARTS = {
    "UTC": [
        "2026-03-09 09:00:00 UTC",
        "2026-03-09 04:30:00 UTC",
        "2026-03-09 03:30:00 UTC",
        "2026-03-08 12:10:00 UTC",
        "2026-03-08 05:30:00 UTC",
        "2026-03-08 04:30:00 UTC",
    ],
    "America/New_York": [
        "2026-03-09 05:00:00 EDT",
        "2026-03-09 00:30:00 EDT",
        "2026-03-08 23:30:00 EDT",
        "2026-03-08 08:10:00 EDT",
        "2026-03-08 00:30:00 EST",
        "2026-03-07 23:30:00 EST",
    ],
    "Asia/Kolkata": [
        "2026-03-09 14:30:00 IST",
        "2026-03-09 10:00:00 IST",
        "2026-03-09 09:00:00 IST",
        "2026-03-08 17:40:00 IST",
        "2026-03-08 11:00:00 IST",
        "2026-03-08 10:00:00 IST",
    ],
}


@pytest.fixture
def seeded():
    return seed(now=timezone.now())


def query(tz: str, **more: str) -> str:
    params = {"from": "2026-03-07", "to": "2026-03-09", "tz": tz, **more}
    return "?" + "&".join(f"{k}={v}" for k, v in params.items())


@pytest.mark.parametrize("tz", list(EXPECTED_STARTS))
def test_requests_page_prints_times_in_the_zone_it_names(seeded, tz: str) -> None:
    url = reverse("dashboard:requests", args=["acme"]) + query(tz)
    html = login(seeded.alice).get(url).content.decode()
    assert f"Started ({tz})" in html
    starts = re.findall(r'<td class="started">([^<]*)</td>', html)
    assert starts == EXPECTED_STARTS[tz]


def test_requests_page_finds_a_request_by_its_id_whatever_the_range(seeded) -> None:
    from accounts.models.usage import UsageRecord

    record = UsageRecord.objects.filter(account=seeded.a, status="failed").get()
    url = reverse("dashboard:requests", args=["acme"])
    client = login(seeded.alice)
    html = client.get(url + f"?request_id={record.request_id}").content.decode()
    assert re.findall(r'<td class="request-id">([^<]*)</td>', html) == [
        record.request_id
    ]
    assert "staging" in html  # the key's name, not only its display
    failed = client.get(url + query("UTC", status="failed")).content.decode()
    assert re.findall(r'<td class="request-id">([^<]*)</td>', failed) == [
        record.request_id
    ]
    other = UsageRecord.objects.filter(account=seeded.b).get()
    html = client.get(url + f"?request_id={other.request_id}").content.decode()
    assert re.findall(r'<td class="request-id">', html) == []  # not another account's


@pytest.mark.parametrize(
    ("tz", "first_start", "day_sums"),
    [
        ("UTC", "2026-03-07T00:00:00+00:00", [0, 340, 300]),
        # New York's 8 March has 23 hours: 04:30Z is still 7 March there, and 03:30Z on
        # the 9th is 23:30 EDT on the 8th.
        ("America/New_York", "2026-03-07T00:00:00-05:00", [100, 540, 0]),
        # Days are built from UTC hours: a :30 zone's day starts at 23:30 local.
        ("Asia/Kolkata", "2026-03-06T23:30:00+05:30", [0, 340, 300]),
    ],
)
def test_csv_buckets_are_in_the_zone_named(
    seeded, tz: str, first_start: str, day_sums: list[int]
) -> None:
    url = reverse("dashboard:usage_csv", args=["acme"]) + query(tz)
    body = b"".join(login(seeded.alice).get(url).streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert rows[0]["bucket_start"] == first_start
    per_bucket: dict[str, int] = {}
    for row in rows:
        start = row["bucket_start"]
        per_bucket[start] = per_bucket.get(start, 0) + int(row["tts_characters"])
    assert [per_bucket[b] for b in sorted(per_bucket)] == day_sums
    if tz == "America/New_York":  # the change's day starts at -05:00, ends at -04:00
        (day,) = {
            r["bucket_end"] for r in rows if r["bucket_start"][:10] == "2026-03-08"
        }
        assert day == "2026-03-09T00:00:00-04:00"
