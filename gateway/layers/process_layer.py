"""The Redis channel layer with one reader per process for every process-specific channel.

channels-redis reads all process-specific channels (``name!…``) of a process through one
``BZPOPMIN`` on the process's "real channel", run by whichever ``receive()`` holds the one
receive lock. Two faults followed, both seen under load:

* a receive cancelled while its ``BZPOPMIN`` reply was on the way lost the message it popped,
  and that message was often another consumer's (Channels cancels a consumer's receive whenever
  the consumer ends): TTS streams lost or reordered chunks;
* each ``new_channel(prefix)`` prefix was a real channel of its own behind that one lock, so a
  receiver on ``readyz.`` waited up to the 5 s blocking wait of the lock holder popping
  ``specific.`` (and a ``worker.`` channel starved behind the consumers').

Here every ``new_channel`` name, whatever its prefix, lies under the one real channel
``specific.<client>!``, and one reader task per event loop pops it into per-channel inboxes. A
``receive()`` on a process-specific channel only waits on its inbox, so cancelling it loses
nothing; a message handed to a receive that was cancelled before it ran goes back to the front.
The reader starts with the first receive and ends by itself after ``READER_IDLE_S`` without a
receiver, or when the layer closes (between two pops, not by cancellation); when it fails
(Redis down) every waiting receive raises its error, as the plain layer's would, and the next
receive starts a new one. A reader cancelled with its event loop (``asyncio.run`` ending) can
lose a reply on its way, as any cancelled Redis command.
Messages nobody takes are dropped after the layer's ``expiry``, and an inbox keeps at most its
channel's capacity (the oldest go first, as channels-redis' ``BoundedQueue``). Channels without
``!`` (the worker queues) keep channels-redis' own receive. Commands wait for a free pooled
connection rather than fail when all are busy.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
import uuid
from typing import Any

from channels_redis.core import RedisChannelLayer
from redis import asyncio as aioredis

logger = logging.getLogger(__name__)

READER_WAIT_S = 1  # one BZPOPMIN of the reader: how soon it sees it is idle
READER_IDLE_S = 5.0  # a reader with no receiver for this long ends
READER_BATCH = 100  # messages taken per round trip after a blocking pop
STOP_PATIENCE_S = 2.0  # a closing layer's reader gets its pop plus this to end
POOL_CONNECTIONS = 200  # per event loop; beyond them a command waits for a free one
POOL_WAIT_S = 10.0  # then fails with redis.ConnectionError


class _Inbox:
    """One process-specific channel's undelivered messages and waiting receives."""

    __slots__ = ("messages", "waiters", "dropped")

    def __init__(self) -> None:
        self.messages: collections.deque[tuple[float, dict[str, Any]]] = (
            collections.deque()
        )
        self.waiters: collections.deque[asyncio.Future[dict[str, Any]]] = (
            collections.deque()
        )
        self.dropped = 0


class ProcessChannelLayer(RedisChannelLayer):  # type: ignore[misc]
    """``RedisChannelLayer`` whose process-specific channels one reader task delivers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.real_channel = f"specific.{self.client_prefix}!"
        self._inboxes: dict[str, _Inbox] = {}
        self._reader: asyncio.Task[None] | None = None
        self._reader_loop: asyncio.AbstractEventLoop | None = None
        self._last_waiter = time.monotonic()

    async def new_channel(self, prefix: str = "specific") -> str:
        """A new channel of this process: ``prefix`` names it, all share one real channel."""
        name = prefix.strip(".") or "specific"
        return f"{self.real_channel}{name}.{uuid.uuid4().hex}"

    def get_capacity(self, channel: str) -> int:
        """The capacity of the pattern that matches ``channel``'s own part (``worker.*``)."""
        if "!" in channel:
            local = channel[channel.index("!") + 1 :]
            for pattern, capacity in self.channel_capacity:
                if pattern.match(local):
                    return int(capacity)
        return int(super().get_capacity(channel))

    def create_pool(self, index: int) -> Any:
        """A pool whose callers wait for a free connection: redis-py 8's default pool holds
        100 and raises ``MaxConnectionsError`` at once beyond them, which under load failed a
        gateway's sends (and the streams they belonged to)."""
        host = dict(self.hosts[index])
        if "address" not in host:  # Sentinel and other entries: channels-redis' pool
            return super().create_pool(index)
        address = host.pop("address")
        host.setdefault("max_connections", POOL_CONNECTIONS)
        host.setdefault("timeout", POOL_WAIT_S)
        return aioredis.BlockingConnectionPool.from_url(address, **host)

    def buffered_channels(self) -> int:
        """How many process-specific channels hold messages or receives (tests, metrics)."""
        return len(self._inboxes)

    async def receive(self, channel: str) -> dict[str, Any]:
        """The next message on ``channel``; cancelling it never loses a message."""
        if "!" not in channel:
            message: dict[str, Any] = await super().receive(channel)
            return message
        assert self.require_valid_channel_name(channel)
        assert self.non_local_name(channel) == self.real_channel, "Wrong client prefix"
        inbox = self._inboxes.get(channel)
        if inbox is not None and inbox.messages:
            _, message = inbox.messages.popleft()
            self._forget_if_empty(channel, inbox)
            return message
        loop = asyncio.get_running_loop()
        self._ensure_reader(loop)
        inbox = self._inboxes.setdefault(channel, _Inbox())
        waiter: asyncio.Future[dict[str, Any]] = loop.create_future()
        inbox.waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._deliver(channel, waiter.result(), front=True)
            raise
        finally:
            self._last_waiter = time.monotonic()
            current = self._inboxes.get(channel)
            if current is not None:
                try:
                    current.waiters.remove(waiter)
                except ValueError:
                    pass
                self._forget_if_empty(channel, current)

    async def close_pools(self) -> None:
        """Stop the reader (its waiting receives raise) and close the connections."""
        await self._stop_reader()
        await super().close_pools()

    async def flush(self) -> None:
        """Drop every buffered message too (channels-redis' flush then closes the pools)."""
        await self._stop_reader()
        self._inboxes.clear()
        await super().flush()

    # -- the reader --------------------------------------------------------------------

    def _ensure_reader(self, loop: asyncio.AbstractEventLoop) -> None:
        reader = self._reader
        if reader is not None and not reader.done():
            if self._reader_loop is loop:
                return
            old = self._reader_loop
            if old is not None and old.is_running() and not old.is_closed():
                raise RuntimeError(
                    "Two event loops are trying to receive() on one channel layer at once!"
                )
            # A reader left on a stopped loop can never run again: its waiters neither.
        if self._reader_loop is not loop:
            for inbox in self._inboxes.values():
                inbox.waiters = collections.deque(
                    w for w in inbox.waiters if w.get_loop() is loop
                )
        self._reader_loop = loop
        self._reader = loop.create_task(self._read(loop), name="channel-layer-reader")

    async def _read(self, loop: asyncio.AbstractEventLoop) -> None:
        """Pop the real channel into the inboxes until idle, or fail every waiter."""
        key = self.prefix + self.real_channel
        me = asyncio.current_task()
        try:
            connection = self.connection(self.consistent_hash(self.real_channel))
            while self._reader is me:  # a stopped or replaced reader ends between pops
                result = await connection.bzpopmin(key, timeout=READER_WAIT_S)
                if result is not None:
                    self._route(result[1])
                    # What else is queued comes in one round trip (oldest first, as sent).
                    for member, _ in await connection.zpopmin(key, READER_BATCH):
                        self._route(member)
                    continue
                self._drop_expired()
                idle_s = time.monotonic() - self._last_waiter
                if idle_s >= READER_IDLE_S and not self._has_waiters(loop):
                    return
        except asyncio.CancelledError:
            raise
        except Exception as error:  # boundary: Redis failed; every receive sees it
            logger.debug("channel-layer reader failed", exc_info=True)
            if self._reader in (me, None):  # not a replaced one: its successor serves
                self._fail(loop, error)

    def _route(self, content: bytes) -> None:
        try:
            message = self.deserialize(content)
        except Exception:  # boundary: one unreadable message must not end the reader
            logger.warning("undecodable channel-layer message dropped", exc_info=True)
            return
        channels = message.pop("__asgi_channel__", None)
        if channels is None:
            logger.warning("process channel message without its channel dropped")
            return
        for channel in channels if isinstance(channels, list) else [channels]:
            self._deliver(
                channel, dict(message) if isinstance(channels, list) else message
            )

    def _deliver(
        self, channel: str, message: dict[str, Any], front: bool = False
    ) -> None:
        inbox = self._inboxes.get(channel)
        if inbox is None:
            inbox = self._inboxes[channel] = _Inbox()
        while inbox.waiters:
            waiter = inbox.waiters.popleft()
            if not waiter.done() and waiter.get_loop() is self._reader_loop:
                waiter.set_result(message)
                return
        if len(inbox.messages) >= self.get_capacity(channel):
            if not inbox.dropped:  # once per inbox: a consumer that stopped reading
                logger.warning("channel %s full: its oldest messages dropped", channel)
            inbox.dropped += 1
            if front:
                return  # the message given back is the oldest
            inbox.messages.popleft()
        entry = (time.monotonic(), message)
        if front:
            inbox.messages.appendleft(entry)
        else:
            inbox.messages.append(entry)

    def _has_waiters(self, loop: asyncio.AbstractEventLoop) -> bool:
        return any(
            not w.done() and w.get_loop() is loop
            for inbox in self._inboxes.values()
            for w in inbox.waiters
        )

    def _fail(self, loop: asyncio.AbstractEventLoop, error: BaseException) -> None:
        for inbox in self._inboxes.values():
            for waiter in inbox.waiters:
                if not waiter.done() and waiter.get_loop() is loop:
                    waiter.set_exception(error)

    def _drop_expired(self) -> None:
        oldest = time.monotonic() - self.expiry
        for channel, inbox in list(self._inboxes.items()):
            while inbox.messages and inbox.messages[0][0] < oldest:
                inbox.messages.popleft()
            self._forget_if_empty(channel, inbox)

    def _forget_if_empty(self, channel: str, inbox: _Inbox) -> None:
        if (
            not inbox.messages
            and not inbox.waiters
            and self._inboxes.get(channel) is inbox
        ):
            del self._inboxes[channel]

    async def _stop_reader(self) -> None:
        reader, self._reader = self._reader, None
        if reader is None or reader.done():
            return
        loop = asyncio.get_running_loop()
        if reader.get_loop() is not loop:
            return
        # It ends after its current pop, with what that pop brought routed; cancelling it
        # could lose a reply on its way (and redis-py may take seconds to give in).
        await asyncio.wait({reader}, timeout=READER_WAIT_S + STOP_PATIENCE_S)
        if not reader.done():
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        self._fail(loop, ConnectionError("the channel layer was closed"))
