"""Child processes of the cross-process tests, seen from the child: scenarios that print JSON
lines on stdout and may wait for a line on stdin."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from typing import Any


def say(**event: Any) -> None:
    print(json.dumps({"t": time.time(), **event}), flush=True)


async def wait_for_stdin() -> str:
    return (await asyncio.to_thread(sys.stdin.readline)).strip()


def run_scenario(scenarios: dict[str, Callable[[dict[str, Any]], Any]]) -> None:
    """Run the scenario named by ``argv[1]`` with the JSON arguments in ``argv[2]``."""
    scenario = scenarios[sys.argv[1]]
    arguments = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    if asyncio.iscoroutinefunction(scenario):
        asyncio.run(scenario(arguments))
    else:
        scenario(arguments)
