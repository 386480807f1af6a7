"""Counts in client messages: a number and the noun that agrees with it.

Every message a client reads that states a quantity goes through ``count``, so none says
"1 seconds" (``tests/gateway/test_wording.py`` scans the apps for hand-made plurals).
"""

from __future__ import annotations

import math


def count(n: float, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun agreeing with it: "1 second", "2 seconds", "1.5 seconds"."""
    text = f"{n:,.2f}".rstrip("0").rstrip(".")
    noun = singular if text == "1" else (plural or singular + "s")
    return f"{text} {noun}"


def retry_after(retry_after_ms: int) -> str:
    """ "Retry after N seconds." with N = ⌈ms ÷ 1000⌉, at least 1 (tts X3)."""
    return f"Retry after {count(max(1, math.ceil(retry_after_ms / 1000)), 'second')}."
