"""A Piper stream's runs after its first: side by side while it is alone (issue 13)."""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import onnxruntime

from tts.worker.engines.base import Pcm
from tts.worker.engines.piper_split import Durations


@dataclass(frozen=True)
class Spoken:
    """A run's audio; a sentence's first audio also carries the sentence's frames per
    phoneme id (its word timestamps, issue 35), when the model gives them."""

    pcm: Pcm = field(repr=False)
    durations: Durations | None = field(default=None, repr=False)
    starts_sentence: bool = True


# One run of a stream: ``run(options, want)`` (want None: the stream's share of the cores).
Run = Callable[[onnxruntime.RunOptions, "int | None"], "Spoken | None"]


class Lanes:
    """A stream's runs after its first, their audio in order.

    ``lanes()`` says how many may go at once: every core while the stream is alone. Runs that
    go beside another take one thread each (two one-thread runs do 1.17x the work of one
    two-thread run on 2 vCPUs) and start as soon as a lane is free, before the caller asks for
    their audio, so the cores do not wait while it handles the audio before (a segment's runs,
    at most ``TTS_SEGMENT_MAX_CHARS`` of text, bound how far ahead they go). A run that would go
    alone starts when its audio is asked for, at the stream's share of the cores: a wide run
    started sooner shared the cores with the caller's work on the audio before it and ran
    5-15 % longer (1.09x against 1.06x Piper alone for a 1000-character text).
    """

    def __init__(
        self, executor: ThreadPoolExecutor, work: list[Run], lanes: Callable[[], int]
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._executor = executor
        self._queue = deque(work)
        self._lanes = lanes
        self._started: deque[
            tuple[asyncio.Future[Spoken | None], onnxruntime.RunOptions]
        ]
        self._started = deque()
        self._refill(eager=True)

    async def next(self) -> Spoken | None:
        """The next run's audio, in order; None after the last."""
        self._refill()
        if not self._started:
            return None
        spoken = await self._started[0][0]
        self._started.popleft()
        return ran(spoken)

    def stop(self) -> None:
        """Start nothing more; terminate the runs still going (Z2)."""
        self._queue.clear()
        for future, options in self._started:
            options.terminate = True
            future.add_done_callback(_retrieve)
        self._started.clear()

    def _refill(self, _: object = None, *, eager: bool = False) -> None:
        """Start runs while lanes are free; ``eager`` (a run just ended, or the first): only
        runs that go beside another."""
        lanes = self._lanes()
        going = sum(not future.done() for future, _ in self._started)
        while self._queue and going < lanes:
            beside = lanes > 1 and (going > 0 or len(self._queue) > 1)
            if eager and not beside:
                return  # a run alone starts when its audio is asked for, at its share
            options = onnxruntime.RunOptions()
            run = functools.partial(
                self._queue.popleft(), options, 1 if beside else None
            )
            future = self._loop.run_in_executor(self._executor, run)
            future.add_done_callback(functools.partial(self._refill, eager=True))
            self._started.append((future, options))
            going += 1


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a terminated run's outcome as seen (None, or ONNX Runtime's ``Fail``)."""
    if not future.cancelled():
        future.exception()


def ran(spoken: Spoken | None) -> Spoken:
    """A run's audio (only a run terminated by its cancelled caller returns None)."""
    assert spoken is not None
    return spoken
