"""Server-sent events as the tests read them."""

from __future__ import annotations

import json
from typing import Any


def data_events(body: str) -> list[dict[str, Any]]:
    """The JSON of each ``data:`` line of an SSE body, in order."""
    return [
        json.loads(line[len("data: ") :])
        for line in body.splitlines()
        if line.startswith("data: ")
    ]
