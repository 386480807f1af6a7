"""The warning for an application Daphne kills names where it hung (gateway.server.daphne_compat)."""

from __future__ import annotations

import asyncio
import logging
import time
from types import SimpleNamespace

import pytest

from gateway.server.daphne_compat import _name_hung, awaiting


async def _stuck_in_gather() -> None:
    await asyncio.gather(asyncio.sleep(60))


async def _consumer() -> None:
    await _stuck_in_gather()


async def test_awaiting_names_every_coroutine_down_to_the_gather() -> None:
    task = asyncio.ensure_future(_consumer())
    await asyncio.sleep(0.01)
    try:
        chain = awaiting(task)
        assert [line.rsplit(" ", 1)[1] for line in chain[:2]] == [
            "_consumer",
            "_stuck_in_gather",
        ]
        assert len(chain) == 3 and ":" not in chain[-1]  # then the future it awaits
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_only_instances_past_the_close_timeout_are_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hung = asyncio.ensure_future(_consumer())
    recent = asyncio.ensure_future(_consumer())
    await asyncio.sleep(0.01)
    server = SimpleNamespace(
        application_close_timeout=10,
        connections={
            "left-long-ago": {
                "disconnected": time.time() - 11,
                "application_instance": hung,
            },
            "left-just-now": {
                "disconnected": time.time(),
                "application_instance": recent,
            },
            "connected": {"application_instance": recent},
        },
    )
    try:
        with caplog.at_level(logging.WARNING, logger="gateway.server.daphne_compat"):
            _name_hung(server)
        assert len(caplog.records) == 1
        assert "left-long-ago" in caplog.text and "_stuck_in_gather" in caplog.text
    finally:
        for task in (hung, recent):
            task.cancel()
        await asyncio.gather(hung, recent, return_exceptions=True)
