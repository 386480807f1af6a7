"""Handler dispatch without Channels' per-message trip to the database thread.

Channels 4.2's ``AsyncConsumer.dispatch`` awaits ``aclose_old_connections()`` before every
handler: a hop onto asgiref's one thread-sensitive sync thread, which is the thread every
``database_sync_to_async`` call of every consumer of the process queues on. Under load that
hop waits behind the accounts' queries: with 200 sockets on the embedded default (SQLite),
each worker message (a submission, a keepalive, an audio append) waited about 1 s for it, the
worker read its submissions 20 s late and dropped them all as past their deadline, and no
request completed (issue 17's soak).

Our handlers never touch the ORM themselves: the worker never imports the database layer
(STYLE 33), and the gateway's database work goes through ``channels.db.database_sync_to_async``
(``accounts.auth``, ``accounts.admission``, ``accounts.metering``), which closes stale
connections around each call in the thread that runs it. So the per-message hop only costs.
"""

from __future__ import annotations

from typing import Any

from channels.consumer import get_handler_name


async def dispatch(consumer: Any, message: dict[str, Any]) -> None:
    """Run ``consumer``'s handler for ``message`` (as Channels does, less the database hop)."""
    handler = getattr(consumer, get_handler_name(message), None)
    if handler is None:
        raise ValueError(f"No handler for message type {message['type']}")
    await handler(message)
