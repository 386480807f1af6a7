"""Hypothesis strategies for hostile clients: JSON of every shape, and frames that are not JSON.

Values mix plausible ones (so cases reach deep into the protocols) with every wrong type,
arbitrary unicode including lone surrogates, huge and non-finite numbers and deep nesting.
Frames are JSON text (escaped or raw), raw text, literals Python's parser refuses, binary
frames and oversized messages.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import strategies as st

# Every code point, lone surrogates (category Cs) included.
ANY_CHAR = st.characters(codec=None, exclude_categories=())
any_text = st.text(ANY_CHAR, max_size=16)
huge_int = st.integers(min_value=-(2**80), max_value=2**80)
numbers = st.one_of(
    st.integers(-3, 70_000),
    huge_int,
    st.floats(allow_nan=True, allow_infinity=True),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, any_text)
# Wrong values one level deep (deep nesting has frames of its own, below).
json_values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(any_text, scalars, max_size=3),
)


def field(*plausible: Any) -> st.SearchStrategy[Any]:
    """A field value: one of the plausible ones most of the time, anything otherwise."""
    return (
        st.one_of(st.sampled_from(plausible), json_values) if plausible else json_values
    )


def event(
    key: str, names: list[str], fields: dict[str, st.SearchStrategy[Any]]
) -> st.SearchStrategy[dict[str, Any]]:
    """An event object: a known or random name (or none) and a few of the fields."""
    name = st.one_of(st.sampled_from(names), any_text, json_values)
    chosen = st.lists(st.sampled_from(sorted(fields)), max_size=5, unique=True)
    body = chosen.flatmap(
        lambda keys: st.fixed_dictionaries({k: fields[k] for k in keys})
    )
    return st.one_of(
        st.tuples(name, body).map(lambda pair: {key: pair[0], **pair[1]}), body
    )


BAD_LITERALS = ("NaN", "Infinity", "-Infinity", "1e999", "-1e400", "9" * 5000)


@st.composite
def json_frame(draw: st.DrawFn, events: st.SearchStrategy[dict[str, Any]]) -> str:
    """An event as JSON text: escaped or raw unicode, sometimes with a bad literal in."""
    body = draw(events)
    text = json.dumps(body, ensure_ascii=draw(st.booleans()))
    if draw(st.integers(0, 9)) == 0 and body:
        key = json.dumps(draw(st.sampled_from(sorted(body, key=str))))
        literal = draw(st.sampled_from(BAD_LITERALS))
        text = text.replace(key + ": ", key + ": " + literal + ", " + key + ": ", 1)
    return text


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def frames(
    events: st.SearchStrategy[dict[str, Any]], oversize: int
) -> st.SearchStrategy[str | bytes]:
    """One client frame."""
    return st.one_of(
        json_frame(events),
        json_frame(events),
        json_frame(events),
        st.text(ANY_CHAR, max_size=40),
        st.integers(1, 5000).map(lambda n: "[" * n),
        st.integers(1, 400).map(nested),
        st.sampled_from(BAD_LITERALS),
        st.binary(max_size=64),
        st.just("x" * (oversize + 1)),
        st.just(json.dumps({"text": "y" * oversize})),
    )


def b64_audio(max_samples: int = 4800) -> st.SearchStrategy[str]:
    """Valid base64 of small PCM16 (mostly silence), or of an odd number of bytes."""
    return st.integers(0, max_samples).flatmap(
        lambda n: st.sampled_from([2 * n, 2 * n + 1]).map(
            lambda size: base64.b64encode(bytes(size)).decode()
        )
    )
