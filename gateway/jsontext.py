"""The one JSON parser and serializer of client-facing traffic (both sockets and REST).

``loads`` turns everything a JSON parser can raise or let through into one ``JsonError`` with
a fixed reason: invalid UTF-8 (bytes) or lone surrogates (text, or ``\\ud800`` escapes), nesting
deeper than ``MAX_DEPTH``, integer literals longer than ``MAX_INT_DIGITS`` (Python refuses
4,300 digits, and parses long ones in quadratic time), ``NaN`` / ``Infinity`` and numbers that
overflow to infinity; given a ``limit``, a message longer than that many bytes (as UTF-8) is
``TooLarge`` before it is parsed, so a socket measures and parses a frame in one call. ``dumps``
is the send path: its text always encodes as UTF-8.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 32  # objects and arrays inside one message
MAX_INT_DIGITS = 64  # digits of one integer literal

_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonError(ValueError):
    """A client message that is not usable JSON; ``reason`` is a fixed phrase."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TooLarge(ValueError):
    """A client message longer than the socket's limit (not a ``JsonError``: it ends the
    stream rather than being refused as bad JSON)."""


def _parse_int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INT_DIGITS:
        raise JsonError("number too large")
    return int(literal)


def _parse_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise JsonError("number too large")
    return value


def _parse_constant(name: str) -> Any:
    raise JsonError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(
    parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant
)


def loads(data: str | bytes, *, limit: int | None = None) -> Any:
    """Parse one client message; raise ``TooLarge`` when it is over ``limit`` bytes, and
    ``JsonError`` for anything but clean JSON."""
    if limit is not None:
        check_size(data, limit)
    if isinstance(data, bytes | bytearray):
        try:
            text = bytes(data).decode("utf-8")  # strict: no surrogatepass
        except UnicodeDecodeError:
            raise JsonError("not UTF-8") from None
    else:
        text = data
    if not text.isascii() and _SURROGATE.search(text):
        raise JsonError("not UTF-8")
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise JsonError(exc.msg) from None
    except RecursionError:
        raise JsonError("nesting too deep") from None
    if "\\u" in text or "\\U" in text:
        _check_strings(value)
    _check_depth(value)
    return value


def _check_depth(value: Any) -> None:
    """Iteratively: no container deeper than ``MAX_DEPTH``."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children: Any
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > MAX_DEPTH:
            raise JsonError("nesting too deep")
        stack.extend((child, depth + 1) for child in children)


def _check_strings(value: Any) -> None:
    """No lone surrogate (from a ``\\ud800`` escape) in any key or string value."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if not node.isascii() and _SURROGATE.search(node):
                raise JsonError("lone surrogate in a string")
        elif isinstance(node, dict):
            stack.extend(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def check_size(data: str | bytes, limit: int) -> None:
    """Raise ``TooLarge`` when ``data`` is over ``limit`` bytes; text counts as UTF-8 (a
    lone surrogate as its three bytes), measured only when it could be over."""
    if isinstance(data, bytes | bytearray):
        size = len(data)
    elif data.isascii() or len(data) * 4 <= limit:
        size = len(data)
    else:
        size = len(data.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise TooLarge("message too large")


def dumps(event: Any) -> str:
    """Serialize a server event; a lone surrogate (never from a parsed message) becomes
    U+FFFD, so the text always encodes as UTF-8."""
    text = json.dumps(event, ensure_ascii=False)
    if not text.isascii() and _SURROGATE.search(text):
        text = _SURROGATE.sub("\ufffd", text)
    return text
