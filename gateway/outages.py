"""Outages of the stores a gateway or worker needs: Redis (the channel layer, limits, liveness)
and the database.

An error that means "the server did not answer" (a refused or dropped connection, a timeout)
is an operating condition, not a bug: callers end what it breaks with the protocol's
service-unavailable error (close 1013, HTTP 503) and log it as one warning line that names the
error's type, never with a traceback; anything else stays a bug, logged with its traceback
(docs/operations.md, "Outages").
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Literal

import redis.exceptions
from django.db import InterfaceError, OperationalError

# What a client of Redis or of the database raises when its server is unreachable.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,  # refused, reset, closed by the server, LOADING
    redis.exceptions.TimeoutError,
    ConnectionError,  # a channel layer closed under its receives (gateway.layers.process_layer)
    OperationalError,  # the database: connection refused, lost, terminated
    InterfaceError,  # the database: a connection already closed
)

# How a stream ends when its boundary catches an exception: a bug, or an outage.
Failure = Literal["internal_error", "service_unavailable"]
FAILURE_CLOSE_CODES: dict[Failure, int] = {
    "internal_error": 1011,
    "service_unavailable": 1013,
}


def is_outage(error: BaseException | None) -> bool:
    """True when ``error``, or the error it was raised from, means a server is unreachable."""
    while error is not None:
        if isinstance(error, OUTAGE_ERRORS):
            return True
        error = error.__cause__
    return False


def log_failure(logger: logging.Logger, message: str, *args: object) -> None:
    """Log the exception being handled: an outage as one warning line with the error's
    type, anything else with its traceback (``logger.exception``)."""
    error = sys.exc_info()[1]
    if is_outage(error):
        logger.warning(message + ": %s", *args, type(error).__name__)
    else:
        logger.exception(message, *args)


def cancel_pending() -> bool:
    """Whether the running task was asked to stop. redis-py, reconnecting during an outage,
    can turn the task's CancelledError into a ConnectionError; a boundary that catches it
    must then end the task (re-raise, or return), never go on: a loop that went on made its
    owner's ``cancel(); await task`` wait until the loop ended by itself (a tick task: 60 s,
    and the socket stayed open all that time)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
