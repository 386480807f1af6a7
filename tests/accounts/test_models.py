"""Model rules (accounts §2, M2, M3): status, display form, validation, indexes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone

from accounts.models.api_keys import ApiKey
from accounts.models.choices import KeyStatus
from accounts.models.plans import Plan
from accounts.models.usage import UsageRecord
from accounts.origins import normalize_origin


def test_apikey_status_order_revoked_then_expired_then_active() -> None:
    past = timezone.now() - timedelta(days=1)
    assert ApiKey().status == KeyStatus.ACTIVE
    assert ApiKey(expires_at=past).status == KeyStatus.EXPIRED
    assert ApiKey(expires_at=past, revoked_at=past).status == KeyStatus.REVOKED
    assert (
        ApiKey(expires_at=timezone.now() + timedelta(days=1)).status == KeyStatus.ACTIVE
    )


def test_apikey_display_form() -> None:
    key = ApiKey(key_prefix="vk_live_Ab12Cd", last4="x9Qz", name="ci")
    assert key.display == "vk_live_Ab12Cd\u2026x9Qz"
    assert str(key) == "vk_live_Ab12Cd\u2026x9Qz (ci)"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("https://App.Example.com", "https://app.example.com"),
        ("https://app.example.com:443", "https://app.example.com"),
        ("http://app.example.com:80", "http://app.example.com"),
        ("http://localhost:3000", "http://localhost:3000"),
        ("http://[::1]:8000", "http://[::1]:8000"),
        ("https://app.example.com/", None),
        ("https://app.example.com/path", None),
        ("app.example.com", None),
        ("https://app.example.com:99999", None),
        ("null", None),
        ("", None),
    ],
)
def test_s13_normalize_origin(given: str, expected: str | None) -> None:
    assert normalize_origin(given) == expected


def test_m3_key_caps_within_plan_and_origins_validated(make_key, plan: Plan) -> None:
    api_key, _ = make_key()
    api_key.rpm_limit = plan.requests_per_minute + 1
    api_key.concurrency_limit = plan.max_concurrent_streams + 1
    api_key.allowed_origins = ["https://ok.example", "not an origin"]
    with pytest.raises(ValidationError) as info:
        api_key.full_clean()
    assert set(info.value.message_dict) == {
        "rpm_limit",
        "concurrency_limit",
        "allowed_origins",
    }


def test_m3_origins_are_normalized_on_clean(make_key) -> None:
    api_key, _ = make_key(
        allowed_origins=["HTTPS://A.example:443", "https://a.example"]
    )
    assert api_key.allowed_origins == ["https://a.example"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("requests_per_minute", 0),
        ("requests_per_minute", 10_001),
        ("max_concurrent_streams", 0),
        ("max_concurrent_streams", 1_001),
        ("max_session_seconds", 59),
        ("max_session_seconds", 7_201),
        ("allowed_endpoints", []),
        ("allowed_endpoints", ["tts", "tts"]),
        ("allowed_endpoints", ["stt"]),
        ("allowed_endpoints", "tts"),
        ("monthly_tts_characters", -1),
    ],
)
@pytest.mark.django_db
def test_m2_plan_ranges(field: str, value: object) -> None:
    plan = Plan(
        name="p",
        requests_per_minute=60,
        max_concurrent_streams=2,
        max_session_seconds=600,
    )
    plan.full_clean(validate_unique=False)
    setattr(plan, field, value)
    with pytest.raises(ValidationError) as info:
        plan.full_clean(validate_unique=False)
    assert field in info.value.message_dict


@pytest.mark.django_db
def test_m2_session_must_fit_rollup_lookback(settings) -> None:
    settings.ROLLUP_LOOKBACK_HOURS = 1
    plan = Plan(
        name="p",
        requests_per_minute=60,
        max_concurrent_streams=2,
        max_session_seconds=3_600,
    )
    with pytest.raises(ValidationError) as info:
        plan.full_clean(validate_unique=False)
    assert "max_session_seconds" in info.value.message_dict


@pytest.mark.django_db
def test_usage_record_has_partial_index_for_the_reaper() -> None:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(
            cursor, UsageRecord._meta.db_table
        )
    assert constraints["acct_usage_open_checkpoint"]["columns"] == [
        "last_checkpoint_at"
    ]
    (index,) = [
        i for i in UsageRecord._meta.indexes if i.name == "acct_usage_open_checkpoint"
    ]
    assert index.condition is not None
