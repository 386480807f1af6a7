"""Key format (accounts K1–K3): pure functions, no database."""

from __future__ import annotations

import hashlib
import re
import zlib

import pytest

from accounts import keys
from accounts.exceptions import AdmissionDenied
from accounts.keys import display_parts, generate_key, hash_key, parse_key

KEY_RE = re.compile(r"vk_live_[0-9A-Za-z]{38}")


def _decode62(text: str) -> int:
    value = 0
    for char in text:
        value = value * 62 + keys.BASE62.index(char)
    return value


def test_k1_production_key_shape() -> None:
    raw = generate_key("vk_live_")
    assert KEY_RE.fullmatch(raw)
    assert len(raw) == 46


def test_k1_checksum_is_base62_crc32_of_prefix_and_random_part() -> None:
    for _ in range(200):
        raw = generate_key("vk_test_")
        body, check = raw[:-6], raw[-6:]
        assert len(check) == 6
        assert _decode62(check) == zlib.crc32(body.encode("ascii"))


def test_k1_checksum_is_left_padded_with_zero() -> None:
    assert keys.checksum("") == "000000"  # crc32(b"") == 0
    small = next(
        body
        for body in (f"vk_test_{n}" for n in range(100_000))
        if zlib.crc32(body.encode()) < 62**5
    )
    assert keys.checksum(small).startswith("0")


def test_k1_keys_are_random() -> None:
    assert len({generate_key("vk_test_") for _ in range(100)}) == 100


@pytest.mark.parametrize(
    "prefix", ["sk_live_", "vk_live", "vk_Live_", "vk__", "vk_live_x_", ""]
)
def test_k1_generate_rejects_bad_prefix(prefix: str) -> None:
    with pytest.raises(ValueError):
        generate_key(prefix)


def test_k2_parse_accepts_any_vk_prefix() -> None:
    for prefix in ("vk_live_", "vk_test_", "vk_staging_"):
        raw = generate_key(prefix)
        parsed = parse_key(raw)
        assert parsed is not None
        assert parsed.prefix == prefix
        assert raw not in repr(parsed)


def _flip(raw: str, index: int) -> str:
    char = raw[index]
    return raw[:index] + ("A" if char != "A" else "B") + raw[index + 1 :]


@pytest.mark.parametrize(
    "mangle",
    [
        lambda raw: _flip(raw, -1),  # checksum
        lambda raw: _flip(raw, 10),  # random part
        lambda raw: raw[:-1],
        lambda raw: raw + "0",
        lambda raw: raw.replace("vk_test_", "vk_live_"),  # checksum covers the prefix
        lambda raw: raw.replace("vk_test_", "sk_test_"),
        lambda raw: raw.replace("vk_test_", "VK_TEST_"),
        lambda raw: raw[:20] + "-" + raw[21:],
        lambda raw: raw[:20] + "é" + raw[21:],
        lambda raw: " " + raw,
        lambda raw: raw + "\n",
        lambda raw: "",
        lambda raw: "Basic " + raw,
        lambda raw: raw * 4,
    ],
)
def test_k2_malformed_keys_do_not_parse(mangle) -> None:
    assert parse_key(mangle(generate_key("vk_test_"))) is None


def test_k2_parse_rejects_non_strings() -> None:
    assert parse_key(None) is None  # type: ignore[arg-type]
    assert parse_key(b"vk_test_x") is None  # type: ignore[arg-type]


def test_k3_hash_is_sha256_hex() -> None:
    raw = generate_key("vk_test_")
    assert hash_key(raw) == hashlib.sha256(raw.encode("ascii")).hexdigest()
    assert len(hash_key(raw)) == 64


def test_k3_display_parts_are_first_14_and_last_4() -> None:
    raw = generate_key("vk_live_")
    prefix, last4 = display_parts(raw)
    assert prefix == raw[:14] and prefix.startswith("vk_live_")
    assert last4 == raw[-4:]


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_AUTHORIZATION": "Bearer vk_test_notakey"},
        {"HTTP_X_API_KEY": "vk_test_" + "A" * 38},
        {"HTTP_AUTHORIZATION": "Basic dXNlcjpwYXNz"},
        {},
    ],
)
def test_k2_malformed_or_missing_key_costs_zero_queries(
    rf, db, django_assert_num_queries, headers
) -> None:
    from accounts.auth import authenticate_http

    request = rf.get("/v1/tts/speakers", **headers)
    with django_assert_num_queries(0), pytest.raises(AdmissionDenied) as info:
        authenticate_http(request, endpoint="tts")
    assert info.value.reason == "invalid_api_key"
