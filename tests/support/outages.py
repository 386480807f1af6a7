"""Outages injected into a gateway in this process: Redis or the database failing as they do
when their server goes away (issue 31)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis.exceptions
from channels.layers import get_channel_layer
from django.db import OperationalError

from gateway.server import lifecycle


def redis_gone(*args: Any, **kwargs: Any) -> Any:
    """Raise what redis-py raises when the server went away."""
    raise redis.exceptions.ConnectionError("Connection closed by server.")


def database_gone(*args: Any, **kwargs: Any) -> Any:
    """Raise what Django raises when the database server went away."""
    raise OperationalError("server closed the connection unexpectedly")


def fail_own_channel_receive(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on the layer's receive fails on the own channel of every open stream."""
    layer = get_channel_layer()
    streams, receive = set(lifecycle._live), layer.receive

    async def failing(channel: str) -> Any:
        if channel in streams:
            redis_gone()
        return await receive(channel)

    monkeypatch.setattr(layer, "receive", failing)


# How the usage record of a stream an outage ended reads: (status, error_code, close_code).
ENDED_BY_OUTAGE = ("failed", "service_unavailable", 1013)


def ended_by(record: Any) -> tuple[str, str, int | None]:
    """A record's (status, error_code, close_code), to compare with ``ENDED_BY_OUTAGE``."""
    return record.status, record.error_code, record.close_code


def assert_quiet(records: list[logging.LogRecord]) -> None:
    """An outage is logged as warnings without tracebacks, never as an error."""
    assert not [r for r in records if r.levelno >= logging.ERROR or r.exc_info], records
