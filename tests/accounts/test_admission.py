"""Admission at connect (accounts E1, E5, S13): authenticate, then the origin check."""

from __future__ import annotations

import uuid

import pytest

from accounts.admission import Admission, admit
from accounts.exceptions import AdmissionDenied

from .conftest import bearer_scope as scope

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def open_key(make_key):
    return make_key()


@pytest.fixture
def browser_key(make_key):
    return make_key(
        allowed_origins=["https://app.example.com", "http://localhost:3000"]
    )


async def test_e1_admit_returns_admission_with_principal(open_key) -> None:
    api_key, raw = open_key
    stream_id = uuid.uuid4()
    admission = await admit(scope(raw), endpoint="tts", stream_id=stream_id)
    assert isinstance(admission, Admission)
    assert admission.principal.key_id == api_key.id
    assert admission.stream_id == stream_id


async def test_e1_admit_generates_stream_id(open_key) -> None:
    first = await admit(scope(open_key[1]), endpoint="asr")
    second = await admit(scope(open_key[1]), endpoint="asr")
    assert first.stream_id.version == 4 and first.stream_id != second.stream_id


async def test_e5_release_is_idempotent(open_key) -> None:
    admission = await admit(scope(open_key[1]), endpoint="tts")
    await admission.release()
    await admission.release()
    assert admission.released


async def test_e1_authentication_failure_comes_first(db) -> None:
    with pytest.raises(AdmissionDenied) as info:
        await admit(scope("vk_test_bad", origin="https://evil.example"), endpoint="tts")
    assert info.value.reason == "invalid_api_key"


async def test_s13_no_origin_header_proceeds_to_key_auth(open_key, browser_key) -> None:
    assert await admit(scope(open_key[1]), endpoint="tts")
    assert await admit(scope(browser_key[1]), endpoint="tts")


async def test_s13_empty_allowed_origins_refuses_every_browser(open_key) -> None:
    with pytest.raises(AdmissionDenied) as info:
        await admit(
            scope(open_key[1], origin="https://app.example.com"), endpoint="tts"
        )
    assert info.value.reason == "origin_not_allowed"


@pytest.mark.parametrize(
    "origin",
    [
        "https://app.example.com",
        "HTTPS://App.Example.COM",
        "https://app.example.com:443",
        "http://localhost:3000",
    ],
)
async def test_s13_allowed_origin_is_admitted(browser_key, origin) -> None:
    admission = await admit(scope(browser_key[1], origin=origin), endpoint="asr")
    assert admission.principal.key_id == browser_key[0].id


@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example.com",
        "http://app.example.com",
        "https://app.example.com:8443",
        "http://localhost:3001",
        "null",
        "",
        "https://app.example.com.evil.com",
    ],
)
async def test_s13_other_origins_are_refused(browser_key, origin) -> None:
    with pytest.raises(AdmissionDenied) as info:
        await admit(scope(browser_key[1], origin=origin), endpoint="asr")
    assert info.value.reason == "origin_not_allowed"
