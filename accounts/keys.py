"""Raw API keys: generate, parse, hash and split for display (accounts K1–K3).

Pure functions with no Django or database access, so a malformed key costs no query (K2).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import zlib
from dataclasses import dataclass, field

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
RANDOM_LENGTH = 32
CHECKSUM_LENGTH = 6
DISPLAY_PREFIX_LENGTH = 14
DISPLAY_SUFFIX_LENGTH = 4
# Longer input is rejected before the regex runs; real keys are under 60 characters.
MAX_KEY_LENGTH = 128

PREFIX_RE = re.compile(r"vk_[a-z]+_")
_KEY_RE = re.compile(
    rf"(?P<prefix>vk_[a-z]+_)(?P<random>[0-9A-Za-z]{{{RANDOM_LENGTH}}})"
    rf"(?P<checksum>[0-9A-Za-z]{{{CHECKSUM_LENGTH}}})"
)


@dataclass(frozen=True)
class ParsedKey:
    """A raw key whose shape and checksum are valid; not yet known to exist."""

    raw: str = field(repr=False)
    prefix: str


def _base62(number: int, *, width: int) -> str:
    digits = []
    while number:
        number, rest = divmod(number, len(BASE62))
        digits.append(BASE62[rest])
    return "".join(reversed(digits)).rjust(width, BASE62[0])


def checksum(body: str) -> str:
    """CRC32 of ``body`` (prefix + random part) in base62, left-padded with ``0``."""
    return _base62(zlib.crc32(body.encode("ascii")), width=CHECKSUM_LENGTH)


def generate_key(prefix: str) -> str:
    """Return a new raw key: ``prefix`` + 32 random base62 characters + checksum (K1)."""
    if not PREFIX_RE.fullmatch(prefix):
        raise ValueError("API key prefix must match ^vk_[a-z]+_$")
    body = prefix + "".join(secrets.choice(BASE62) for _ in range(RANDOM_LENGTH))
    return body + checksum(body)


def parse_key(raw: str) -> ParsedKey | None:
    """Return the key if its shape and checksum are valid, else None (K2)."""
    if not isinstance(raw, str) or len(raw) > MAX_KEY_LENGTH:
        return None
    match = _KEY_RE.fullmatch(raw)
    if match is None:
        return None
    expected = checksum(match["prefix"] + match["random"])
    if not secrets.compare_digest(expected, match["checksum"]):
        return None
    return ParsedKey(raw=raw, prefix=match["prefix"])


def hash_key(raw: str) -> str:
    """Hex SHA-256 of the raw key: the only form that is stored (K3)."""
    return hashlib.sha256(raw.encode("ascii")).hexdigest()


def display_parts(raw: str) -> tuple[str, str]:
    """Return ``(key_prefix, last4)``: the first 14 and the last 4 characters (K3)."""
    return raw[:DISPLAY_PREFIX_LENGTH], raw[-DISPLAY_SUFFIX_LENGTH:]
