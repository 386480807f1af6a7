"""``gateway.jsontext.loads`` measures a message against a socket's limit before parsing it."""

from __future__ import annotations

import pytest

from gateway import jsontext


def test_text_at_the_limit_parses_one_byte_more_is_too_large() -> None:
    text = '{"a":"' + "x" * 10 + '"}'
    assert jsontext.loads(text, limit=len(text)) == {"a": "x" * 10}
    with pytest.raises(jsontext.TooLarge):
        jsontext.loads(text, limit=len(text) - 1)


def test_text_counts_utf8_bytes_not_characters() -> None:
    text = '{"a":"' + "é" * 10 + '"}'  # 18 characters, 28 bytes
    assert jsontext.loads(text, limit=28) == {"a": "é" * 10}
    with pytest.raises(jsontext.TooLarge):
        jsontext.loads(text, limit=27)


def test_a_lone_surrogate_counts_three_bytes() -> None:
    with pytest.raises(jsontext.TooLarge):
        jsontext.check_size("\ud800", 2)
    jsontext.check_size("\ud800", 3)


def test_bytes_are_measured_as_they_are() -> None:
    with pytest.raises(jsontext.TooLarge):
        jsontext.loads(b"[1, 2]", limit=5)
    assert jsontext.loads(b"[1, 2]", limit=6) == [1, 2]


def test_too_large_is_not_a_json_error() -> None:
    """A parser that refuses bad JSON must not swallow the size limit."""
    assert not issubclass(jsontext.TooLarge, jsontext.JsonError)
