"""The fields of a TTS request (docs/specs/tts-ws.md §2.1, R2, R5), each validated alone: pure
functions that return the field's value (None when absent) or raise ``InvalidField`` with the
fixed message. ``request`` validates a message's fields in table order (speaker last, as in R1);
``tts.protocol`` makes the ``TtsRequest`` of them and reports a VALIDATION_ERROR."""

from __future__ import annotations

import logging
import math
from typing import Any

from django.conf import settings

from gateway.logs import REQUEST_ID
from tts.audio import DEFAULT_FORMAT, DEFAULT_RATE, FORMATS, MULAW_RATE, SAMPLE_RATES

logger = logging.getLogger(__name__)

REQUEST_FIELDS = (
    "text speaker temperature top_k top_p max_tokens repetition_penalty seed chunking "
    "normalize format sample_rate request_id speed keep_alive timestamps "
    "word_timestamps"
).split()


class InvalidField(Exception):
    """A request field that cannot be used, with the fixed message the client reads."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @classmethod
    def expected(cls, name: str, expected: str) -> InvalidField:
        """R2's wording: ``Field 'name' must be …``."""
        return cls(f"Field '{name}' must be {expected}")


def number(data: dict[str, Any], name: str, lo: float, hi: float) -> float | None:
    """A finite number within ``[lo, hi]``."""
    value = data.get(name)
    if value is None:
        return None
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    )
    if not ok or not lo <= value <= hi:
        raise InvalidField.expected(name, f"a number between {lo:g} and {hi:g}")
    return float(value)


def integer(data: dict[str, Any], name: str) -> int | None:
    """The field as an int (integral floats allowed, R2), None when absent; raise else."""
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(name)
    return value


def ranged_integer(data: dict[str, Any], name: str, lo: int, hi: int) -> int | None:
    """An integer within ``[lo, hi]``."""
    try:
        value = integer(data, name)
    except ValueError:
        value = lo - 1
    if value is None:
        return None
    if not lo <= value <= hi:
        raise InvalidField.expected(name, f"an integer between {lo} and {hi}")
    return value


def boolean(data: dict[str, Any], name: str) -> bool | None:
    """A JSON boolean."""
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise InvalidField.expected(name, "a boolean")
    return value


def text(data: dict[str, Any]) -> str:
    """The non-empty ``text`` of a whole request, within ``TTS_MAX_TEXT_CHARS``."""
    text = data.get("text")
    if not isinstance(text, str) or not text.strip():
        raise InvalidField("Text is required and cannot be empty")
    limit = settings.TTS_MAX_TEXT_CHARS  # spec §3: the default is MAX_TEXT_CHARS
    if len(text) > limit:
        raise InvalidField(f"Text too long: {len(text)} chars (max {limit})")
    return text


def top_k(data: dict[str, Any]) -> int | None:
    """``top_k``: 1…1000, or 0 or -1 (off)."""
    try:
        value = integer(data, "top_k")
    except ValueError:
        value = -2
    if value is None:
        return None
    if not -1 <= value <= 1000:
        raise InvalidField.expected(
            "top_k", "an integer between 1 and 1000, or 0 or -1"
        )
    return value


def top_p(data: dict[str, Any]) -> float | None:
    """``top_p``: above 0, at most 1."""
    value = data.get("top_p")
    if value is None:
        return None
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and 0.0 < value <= 1.0
    )
    if not ok:
        raise InvalidField.expected("top_p", "a number greater than 0 and at most 1")
    return float(value)


def format_and_rate(data: dict[str, Any]) -> tuple[str, int]:
    """``format`` and ``sample_rate`` together (μ-law has one rate), defaults applied."""
    fmt = data.get("format")
    fmt = DEFAULT_FORMAT if fmt is None else fmt
    if fmt not in FORMATS:
        shown = str(fmt)[:32]
        raise InvalidField(
            f"Unsupported format '{shown}' (supported: {', '.join(FORMATS)})"
        )
    default = MULAW_RATE if fmt == "mulaw" else DEFAULT_RATE
    try:
        rate = integer(data, "sample_rate")
    except ValueError:
        rate = 0
    rate = default if rate is None else rate
    if fmt == "mulaw" and rate != MULAW_RATE:
        raise InvalidField.expected(
            "sample_rate", f"{MULAW_RATE} when format is 'mulaw'"
        )
    if rate not in SAMPLE_RATES:
        raise InvalidField.expected(
            "sample_rate", f"one of {', '.join(map(str, SAMPLE_RATES))}"
        )
    return fmt, rate


def speaker(data: dict[str, Any]) -> str | None:
    """``speaker`` as given (resolved later, R5)."""
    value = data.get("speaker")
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidField.expected("speaker", "a string")
    return value


def request_id(data: dict[str, Any]) -> str | None:
    """The client's own request id (X1)."""
    value = data.get("request_id")
    if value is None:
        return None
    if not (isinstance(value, str) and REQUEST_ID.fullmatch(value)):
        raise InvalidField.expected(
            "request_id", "at most 64 characters of [A-Za-z0-9._:-]"
        )
    return value


def request(data: dict[str, Any], *, incremental: bool) -> dict[str, Any]:
    """A request's fields in table order (§2.1): ``text`` (none yet for an incremental
    ``start``), then the others the message gives, speaker last; absent ones are left out, so
    the request's own defaults apply."""
    fields: dict[str, Any] = {
        "text": "" if incremental else text(data),
        "incremental": incremental,
        "temperature": number(data, "temperature", 0.0, 2.0),
        "top_k": top_k(data),
        "top_p": top_p(data),
        "max_tokens": ranged_integer(data, "max_tokens", 1, 8192),
        "repetition_penalty": number(data, "repetition_penalty", 1.0, 2.0),
        "seed": ranged_integer(data, "seed", 0, 4_294_967_295),
        "chunking": boolean(data, "chunking"),
        "normalize": boolean(data, "normalize"),
    }
    fields["format"], fields["sample_rate"] = format_and_rate(data)
    fields["request_id"] = request_id(data)
    fields["speed"] = number(data, "speed", 0.5, 2.0)
    fields["keep_alive"] = boolean(data, "keep_alive")
    fields["timestamps"] = boolean(data, "timestamps")
    fields["word_timestamps"] = boolean(data, "word_timestamps")
    fields["speaker"] = speaker(data)
    unknown = sorted(set(data) - set(REQUEST_FIELDS) - {"event"})
    if unknown:
        logger.debug("ignored unknown request fields: %s", ", ".join(unknown)[:200])
    return {name: value for name, value in fields.items() if value is not None}
