"""``/v1/organization/usage/audio_*`` in OpenAI's page shape, by key or session."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from accounts.services.api_keys import api_key_create
from tests.support.dashboard_seed import PASSWORD, at, seed

pytestmark = pytest.mark.django_db
SPEECH = "/v1/organization/usage/audio_speeches"
TRANSCRIPTION = "/v1/organization/usage/audio_transcriptions"
MAR7 = int(at("2026-03-07T00:00").timestamp())
MAR10 = int(at("2026-03-10T00:00").timestamp())


@pytest.fixture
def seeded():
    return seed(now=timezone.now())


@pytest.fixture
def key_a(seeded) -> str:
    _, raw = api_key_create(
        account=seeded.a, name="script", actor=None, actor_label="t"
    )
    return raw


def get(path: str, raw: str | None = None, **params) -> tuple[int, dict]:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {raw}"} if raw else {}
    response = Client().get(path, params, **headers)
    return response.status_code, response.json()


def test_speeches_daily_buckets_in_openai_shape(key_a) -> None:
    status, page = get(SPEECH, key_a, start_time=MAR7, end_time=MAR10)
    assert status == 200
    assert (
        page["object"] == "page"
        and page["has_more"] is False
        and page["next_page"] is None
    )
    assert [b["start_time"] for b in page["data"]] == [
        MAR7,
        MAR7 + 86400,
        MAR7 + 2 * 86400,
    ]
    assert all(
        b["object"] == "bucket" and b["end_time"] - b["start_time"] == 86400
        for b in page["data"]
    )
    assert page["data"][0]["results"] == []
    result = page["data"][1]["results"][0]
    assert result == {
        "object": "organization.usage.audio_speeches.result",
        "characters": 340,
        "num_model_requests": 3,
        "project_id": None,
        "user_id": None,
        "api_key_id": None,
        "model": None,
    }


def test_transcriptions_seconds_grouped_by_key_and_model(seeded, key_a) -> None:
    status, page = get(
        TRANSCRIPTION,
        key_a,
        start_time=MAR7,
        end_time=MAR10,
        **{"group_by[]": ["api_key_id", "model"]},
    )
    assert status == 200
    results = page["data"][2]["results"]
    assert results == [
        {
            "object": "organization.usage.audio_transcriptions.result",
            "seconds": 7,  # 6.5 s rounded
            "num_model_requests": 2,
            "project_id": None,
            "user_id": None,
            "api_key_id": str(seeded.keys["prod"].id),
            "model": "whisper-tiny.en",
        }
    ]


def test_hourly_buckets_paginate_with_the_cursor(key_a) -> None:
    start = int(at("2026-03-08T00:00").timestamp())
    status, first = get(
        SPEECH,
        key_a,
        start_time=start,
        end_time=start + 48 * 3600,
        bucket_width="1h",
        limit=24,
    )
    assert status == 200 and len(first["data"]) == 24 and first["has_more"]
    _, second = get(
        SPEECH,
        key_a,
        start_time=start,
        end_time=start + 48 * 3600,
        bucket_width="1h",
        limit=24,
        page=first["next_page"],
    )
    assert (
        second["data"][0]["start_time"] == start + 24 * 3600 and not second["has_more"]
    )
    chars = [
        r["characters"]
        for p in (first, second)
        for b in p["data"]
        for r in b["results"]
    ]
    assert sum(chars) == 640  # every TTS character of 8 and 9 March


def test_bad_parameters_get_openai_errors(key_a) -> None:
    for params, param in (
        ({}, "start_time"),
        ({"start_time": MAR7, "bucket_width": "1m"}, "bucket_width"),
        ({"start_time": MAR7, "limit": 500}, "limit"),
        ({"start_time": MAR7, "group_by": "project"}, "group_by"),
        ({"start_time": MAR7, "end_time": MAR7}, "end_time"),
        ({"start_time": MAR7, "page": "nope"}, "page"),
        ({"start_time": "x"}, "start_time"),
    ):
        status, body = get(SPEECH, key_a, **params)
        assert status == 400 and body["error"]["param"] == param, params
        assert body["error"]["type"] == "invalid_request_error"


def test_no_other_accounts_usage_by_key_filter_or_session(seeded, key_a) -> None:
    beta = str(seeded.keys["beta-key"].id)
    assert get(SPEECH, key_a, start_time=MAR7, api_key_ids=beta)[0] == 403
    assert get(SPEECH, key_a, start_time=MAR7, account="beta")[0] == 403
    assert get(SPEECH, None, start_time=MAR7)[0] == 401
    assert get(SPEECH, "vk_test_" + "x" * 38, start_time=MAR7)[0] == 401
    client = Client()
    client.login(username="alice", password=PASSWORD)
    own = client.get(SPEECH, {"start_time": MAR7, "end_time": MAR10})
    assert own.status_code == 200
    assert "7777" not in own.content.decode()
    assert (
        client.get(SPEECH, {"start_time": MAR7, "account": "beta"}).status_code == 403
    )
    staff = Client()
    staff.login(username="staff", password=PASSWORD)
    everyone = staff.get(SPEECH, {"start_time": MAR7, "end_time": MAR10}).json()
    assert (
        sum(r["characters"] for b in everyone["data"] for r in b["results"])
        == 640 + 7777
    )
