"""Tasks that outlive the request or stream that starts them (a retry, a later fold).

A task copies the context of the code that creates it. Inside a request that context holds
asgiref's executor of the request's thread (``AsyncToSync.executors``, set where a sync
middleware runs an async view), which quits when the request ends: a later
``database_sync_to_async`` in the task then fails with "CurrentThreadExecutor already quit".
``detached`` runs the task in a fresh context instead (no request id on its log lines).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def detached(coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Run ``coro`` as a task of the running loop in a context of its own."""
    return asyncio.get_running_loop().create_task(coro, context=contextvars.Context())
