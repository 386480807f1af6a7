"""Decode slots of one loaded ASR engine, shared by every session job of the process.

Final decodes have priority over chunk decodes (SA-7): engines run chunk decodes at
background priority, the gate never holds a final for one, and a chunk decode does not start
while a final decode waits.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from asr.worker.engines.base import AsrEngine


class DecodeGate:
    """Decode slots of one engine, ``slots`` for final and as many for chunk decodes (WK-6).

    Engines run chunk decodes at background priority, so a final decode never waits for one;
    a chunk decode does not start while a final decode waits.
    """

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.busy = {True: 0, False: 0}  # by ``final``
        self._waiters: dict[bool, deque[asyncio.Future[None]]] = {
            True: deque(),
            False: deque(),
        }

    @asynccontextmanager
    async def slot(self, *, final: bool) -> AsyncIterator[None]:
        """Hold one decode slot of the class ``final``."""
        if self.free(final=final):
            self.busy[final] += 1
        else:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters[final].append(waiter)
            try:
                await waiter  # _wake counted the slot as ours
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._release(final)
                elif waiter in self._waiters[final]:
                    self._waiters[final].remove(waiter)
                    self._wake()
                raise
        try:
            yield
        finally:
            self._release(final)

    def idle(self, *, final: bool) -> bool:
        """No decode of the class ``final`` running or waiting."""
        return not self.busy[final] and not self._waiters[final]

    def free(self, *, final: bool) -> bool:
        """A decode of the class ``final`` started now would run at once."""
        if self._waiters[final] or self.busy[final] >= self.slots:
            return False
        return final or not self._waiters[True]

    def _release(self, final: bool) -> None:
        self.busy[final] -= 1
        self._wake()

    def _wake(self) -> None:
        for final in (True, False):
            waiters = self._waiters[final]
            while waiters and self.busy[final] < self.slots:
                if not final and self._waiters[True]:
                    return
                waiter = waiters.popleft()
                if not waiter.done():
                    self.busy[final] += 1
                    waiter.set_result(None)


_gates: weakref.WeakKeyDictionary[Any, DecodeGate] = weakref.WeakKeyDictionary()


def decode_gate(engine: AsrEngine) -> DecodeGate:
    """The gate of ``engine``: one per loaded engine, with the engine's decode slots."""
    gate = _gates.get(engine)
    if gate is None:
        gate = _gates[engine] = DecodeGate(max(1, engine.decode_slots))
    return gate
