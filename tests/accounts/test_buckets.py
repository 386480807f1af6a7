"""Bucket arithmetic in the viewer's zone: DST changes, month ends, odd offsets (pure)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from accounts import buckets as bk

NY = bk.zone("America/New_York")
LATER = datetime(2030, 1, 1, tzinfo=UTC)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_spring_forward_day_has_23_hours_and_the_days_tile_the_range() -> None:
    days = bk.buckets(
        first=date(2026, 3, 7), last=date(2026, 3, 9), tz=NY, width="day", now=LATER
    )
    assert [d.label for d in days] == ["2026-03-07", "2026-03-08", "2026-03-09"]
    assert [d.hours for d in days] == [24, 23, 24]
    assert days[1].start == utc("2026-03-08T05:00") and days[1].end == utc(
        "2026-03-09T04:00"
    )
    assert all(a.end == b.start for a, b in zip(days, days[1:], strict=False))


def test_fall_back_day_has_25_hours_and_two_one_oclock_hours_told_apart() -> None:
    days = bk.buckets(
        first=date(2026, 11, 1), last=date(2026, 11, 1), tz=NY, width="day", now=LATER
    )
    assert days[0].hours == 25
    hours = bk.buckets(
        first=date(2026, 11, 1), last=date(2026, 11, 1), tz=NY, width="hour", now=LATER
    )
    assert len(hours) == 25
    ones = [h.label for h in hours if " 01:00" in h.label]
    assert ones == ["2026-11-01 01:00 -04:00", "2026-11-01 01:00 -05:00"]
    assert hours[0].label == "2026-11-01 00:00"


def test_hour_buckets_on_the_spring_forward_day_skip_the_missing_wall_hour() -> None:
    hours = bk.buckets(
        first=date(2026, 3, 8), last=date(2026, 3, 8), tz=NY, width="hour", now=LATER
    )
    labels = [h.label for h in hours]
    assert len(hours) == 23
    assert "2026-03-08 02:00" not in labels and "2026-03-08 03:00" in labels


def test_every_utc_hour_lands_in_exactly_one_local_day_in_every_kind_of_zone() -> None:
    for name in (
        "UTC",
        "America/New_York",
        "Asia/Kolkata",
        "Asia/Kathmandu",
        "Australia/Lord_Howe",
        "Pacific/Chatham",
    ):
        tz = bk.zone(name)
        days = bk.buckets(
            first=date(2026, 1, 1),
            last=date(2026, 12, 31),
            tz=tz,
            width="day",
            now=LATER,
        )
        assert sum(d.hours for d in days) == (days[-1].end - days[0].start) / timedelta(
            hours=1
        )
        assert all(a.end == b.start for a, b in zip(days, days[1:], strict=False)), name
        assert len(days) == 365


def test_half_hour_zone_days_start_at_the_utc_hour_before_local_midnight() -> None:
    kolkata = bk.zone("Asia/Kolkata")
    start, end = bk.window(date(2026, 5, 1), date(2026, 5, 1), kolkata)
    # Local midnight is 18:30Z the day before; the day starts at 18:00Z.
    assert start == utc("2026-04-30T18:00") and end == utc("2026-05-01T18:00")


def test_month_ends_and_leap_day() -> None:
    days = bk.buckets(
        first=date(2028, 2, 27),
        last=date(2028, 3, 1),
        tz=bk.zone("UTC"),
        width="day",
        now=LATER,
    )
    assert [d.label for d in days] == [
        "2028-02-27",
        "2028-02-28",
        "2028-02-29",
        "2028-03-01",
    ]
    assert bk.is_utc_aligned(days)
    new_year = bk.buckets(
        first=date(2026, 12, 31), last=date(2027, 1, 1), tz=NY, width="day", now=LATER
    )
    assert new_year[1].start == utc("2027-01-01T05:00")
    assert not bk.is_utc_aligned(new_year)


def test_only_begun_buckets_are_listed_and_the_current_one_is_partial() -> None:
    now = utc("2026-03-09T10:15")
    hours = bk.buckets(
        first=date(2026, 3, 9),
        last=date(2026, 3, 9),
        tz=bk.zone("UTC"),
        width="hour",
        now=now,
    )
    assert (
        len(hours) == 11
        and hours[-1].partial
        and not any(h.partial for h in hours[:-1])
    )
    days = bk.buckets(
        first=date(2026, 3, 1),
        last=date(2026, 3, 31),
        tz=bk.zone("UTC"),
        width="day",
        now=now,
    )
    assert len(days) == 9 and days[-1].partial


def test_range_caps_and_unknown_zones() -> None:
    assert bk.range_error(date(2026, 1, 1), date(2026, 1, 31), "hour") is None
    assert "31" in (bk.range_error(date(2026, 1, 1), date(2026, 2, 1), "hour") or "")
    assert bk.range_error(date(2025, 1, 1), date(2026, 2, 4), "day") is None
    assert "400" in (bk.range_error(date(2025, 1, 1), date(2026, 2, 5), "day") or "")
    assert bk.range_error(date(2026, 1, 2), date(2026, 1, 1), "day")
    with pytest.raises(ValueError):
        bk.zone("Mars/Olympus_Mons")
    with pytest.raises(ValueError):
        bk.zone("../../etc/passwd")


def test_bucket_of_finds_the_bucket_by_start() -> None:
    starts = [utc("2026-03-08T05:00"), utc("2026-03-09T04:00")]
    assert bk.bucket_of(starts, utc("2026-03-08T04:00")) is None
    assert bk.bucket_of(starts, utc("2026-03-09T03:00")) == 0
    assert bk.bucket_of(starts, utc("2026-03-09T04:00")) == 1


def test_quota_forecast_projects_the_month_to_date_rate_to_the_month_end() -> None:
    from accounts.selectors.quota import forecast, month_bounds

    assert month_bounds(utc("2026-02-10T00:00")) == (
        utc("2026-02-01T00:00"),
        utc("2026-03-01T00:00"),
    )
    assert month_bounds(utc("2026-12-31T23:00"))[1] == utc("2027-01-01T00:00")
    projected, _ = forecast(1000, now=utc("2026-02-15T00:00"))  # 14 of 28 days
    assert projected == 2000
    early, _ = forecast(
        100, now=utc("2026-02-01T01:00")
    )  # a day at least: no wild guess
    assert early == 2895  # 100 a day over the 27.96 days left, plus the 100


def test_day_shift_moves_hours_onto_their_local_day_or_gives_up() -> None:
    from accounts.selectors.bucketing import day_shift

    def days(name: str, first: date, last: date) -> list[bk.Bucket]:
        return bk.buckets(
            first=first, last=last, tz=bk.zone(name), width="day", now=LATER
        )

    assert day_shift(
        days("America/New_York", date(2026, 3, 7), date(2026, 3, 9)), NY
    ) == timedelta(0)
    kolkata = bk.zone("Asia/Kolkata")
    assert day_shift(
        days("Asia/Kolkata", date(2026, 5, 1), date(2026, 5, 3)), kolkata
    ) == timedelta(minutes=30)
    kathmandu = bk.zone("Asia/Kathmandu")
    assert day_shift(
        days("Asia/Kathmandu", date(2026, 5, 1), date(2026, 5, 3)), kathmandu
    ) == timedelta(minutes=15)
    # Lord Howe moves by 30 minutes in April: no single shift fits, Python folds instead.
    howe = bk.zone("Australia/Lord_Howe")
    assert (
        day_shift(
            days("Australia/Lord_Howe", date(2026, 4, 1), date(2026, 4, 10)), howe
        )
        is None
    )


def test_a_moments_day_is_the_day_bucket_that_holds_it() -> None:
    """In a half-hour zone the last minutes of a local day lie in the UTC hour that
    starts the next day's bucket, so they belong to that day (else the current hour fell
    outside the default range: the CI failure at 18:21Z, 23:51 in Kolkata)."""
    kolkata, st_johns = bk.zone("Asia/Kolkata"), bk.zone("America/St_Johns")
    for moment, zone in (
        (utc("2026-12-06T18:21"), kolkata),  # 23:51 +05:30
        (utc("2026-12-07T03:10"), st_johns),  # 23:40 -03:30
        (utc("2026-12-06T18:00"), kolkata),  # 23:30 +05:30, the hour's first instant
    ):
        day = bk.local_date(moment, zone)
        assert day == moment.astimezone(zone).date() + timedelta(days=1)
        start, end = bk.window(day, day, zone)
        assert start <= moment < end
    for moment, zone in (
        (utc("2026-12-06T17:59"), kolkata),  # 23:29 +05:30
        (utc("2026-12-06T18:21"), bk.zone("UTC")),
        (utc("2026-12-06T04:59"), NY),
    ):
        assert bk.local_date(moment, zone) == moment.astimezone(zone).date()


@pytest.mark.parametrize("tz", ["UTC", "America/New_York", "Asia/Kolkata"])
@pytest.mark.parametrize("now", [utc("2026-03-09T06:40"), utc("2026-03-09T18:21")])
def test_the_default_hour_range_is_the_last_48_hours(tz: str, now: datetime) -> None:
    """Issue 37: hours open on a rolling 48 hours, here across New York's DST change (the
    local days they touch, from the first of those hours); typed dates are not rolling.
    18:21Z is 23:51 in Kolkata, inside the UTC hour that opens the next local day."""
    from accounts.forms import UsageFilterForm
    from accounts.selectors.sources import UsageFilter

    form = UsageFilterForm({"granularity": "hour", "tz": tz}, now=now)
    assert form.is_valid(), form.errors
    data = form.cleaned_data
    assert data["since"] == bk.floor_hour(now) - 47 * bk.HOUR
    zone = bk.zone(tz)
    assert data["from"] == bk.local_date(data["since"], zone)
    assert data["to"] == bk.local_date(now, zone)
    flt = UsageFilter(data["from"], data["to"], zone, "hour", since=data["since"])
    items = flt.buckets(now)
    assert len(items) == 48 and items[0].start == data["since"] and items[-1].partial
    assert items[-1].start == bk.floor_hour(now)
    assert flt.window() == (data["since"], bk.window(data["from"], data["to"], zone)[1])
    days_span = sum((d.end - d.start for d in flt.days(now)), timedelta())
    assert days_span >= timedelta(hours=48)
    typed = UsageFilterForm({"granularity": "hour", "tz": tz, "to": "2026-03-08"})
    assert typed.is_valid() and typed.cleaned_data["since"] is None
    assert typed.cleaned_data["from"] == date(2026, 3, 7)
    days = UsageFilterForm({"tz": tz}, now=now)
    assert days.is_valid() and days.cleaned_data["since"] is None
    day_range = days.cleaned_data["from"], days.cleaned_data["to"]
    today = UsageFilter(*day_range, zone, "day").buckets(now)[-1]
    assert today.start <= now < today.end and today.partial
