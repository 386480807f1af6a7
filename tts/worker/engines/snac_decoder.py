"""The worker's one SNAC decoder, shared by every stream, and the streaming decode of a segment.

``SnacCodec`` wraps the ``snac`` model on its device with positional noise (``snac_window``).
``SnacBatcher`` runs it in one thread and decodes the windows of concurrent streams in one
batched call per window length: it takes the first window waiting, collects more for up to
``timeout_s`` or until ``max_batch`` (Baseten-style dynamic batching), groups them by length and
decodes each group at once. ``SnacStream`` is one segment: frames in, exactly 2048 samples per
frame out, through the shared batcher.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from tts.orpheus.snac_tokens import SNAC_RATE, Frame
from tts.worker.engines.base import Pcm
from tts.worker.engines.snac_window import (
    MAX_STEP,
    SAMPLES_PER_FRAME,
    Codes,
    FrameStore,
    Noise,
    Window,
    WindowPlanner,
    layer_lengths,
    snac_levels,
)

logger = logging.getLogger(__name__)


class SnacCodec:
    """SNAC's decoder on one device; its noise comes from the caller (positional)."""

    def __init__(self, model: Any, device: str, *, noise: bool) -> None:
        import torch

        self.torch = torch
        self.model = model.to(device).eval()
        self.device = device
        assert model.sampling_rate == SNAC_RATE, "a 24 kHz SNAC checkpoint is required"
        blocks = [
            m for m in model.decoder.modules() if type(m).__name__ == "NoiseBlock"
        ]
        for index, block in enumerate(blocks):
            block.forward = partial(self._noise_block, block, index)
        lengths = layer_lengths(model.decoder_rates, model.vq_strides[0])
        assert lengths[-1] == SAMPLES_PER_FRAME
        # One noise layer per upsampling block that has a NoiseBlock (all or none).
        self.noise_lengths = lengths if blocks and noise else None
        self._noise: list[Any] | None = None

    @classmethod
    def load(
        cls, path: Path, *, random_init: bool, device: str, noise: bool, threads: int
    ) -> SnacCodec:
        """Load ``path`` (config.json + pytorch_model.bin); random weights only if asked."""
        import torch
        from snac import SNAC

        if device == "cpu":
            torch.set_num_threads(threads)
        weights = path / "pytorch_model.bin"
        if weights.exists():
            model = SNAC.from_pretrained(str(path))
        elif random_init:
            torch.manual_seed(0)  # the same random decoder in every process
            model = SNAC.from_config(str(path / "config.json"))
        else:
            raise FileNotFoundError(
                f"TTS_SNAC_MODEL has no {weights.name} (random weights need "
                "TTS_SNAC_RANDOM_INIT=true, for tests only)"
            )
        return cls(model, device, noise=noise)

    def warm_up(self) -> None:
        """One small decode, so the first request does not pay for kernel setup."""
        store = FrameStore(seed=0, noise_lengths=self.noise_lengths, left=0)
        store.append([(0,) * 7] * 3)
        self.decode([store.window_input(Window(0, 3, 0, 3))])

    def decode(self, windows: Sequence[tuple[Codes, Noise | None]]) -> list[Pcm]:
        """Decode windows of equal length in one call; float32 audio per window."""
        torch = self.torch
        frames = windows[0][0].shape[0]
        assert all(codes.shape[0] == frames for codes, _ in windows)
        levels = [
            np.stack(level)
            for level in zip(*(snac_levels(c) for c, _ in windows), strict=True)
        ]
        codes = [torch.from_numpy(level).to(self.device) for level in levels]
        self._noise = None
        if self.noise_lengths:
            noises = [noise for _, noise in windows]
            assert all(noise is not None for noise in noises)
            self._noise = [
                torch.from_numpy(np.stack(layer)[:, None, :]).to(self.device)
                for layer in zip(*noises, strict=True)  # type: ignore[call-overload]
            ]
        with torch.inference_mode():
            audio = self.model.decode(codes)[:, 0, :]
        return list(audio.float().cpu().numpy())

    def _noise_block(self, block: Any, index: int, x: Any) -> Any:
        if self._noise is None:
            return x
        noise = self._noise[index]
        assert noise.shape[-1] == x.shape[-1], "noise and signal lengths differ"
        return x + noise.to(x.dtype) * block.linear(x)


@dataclass
class DecoderCounters:
    """What the shared decoder did (for tests, the bench and logs)."""

    calls: int = 0  # batched model calls
    windows: int = 0  # windows decoded
    frames: int = 0  # frames decoded, context included
    busy_s: float = 0.0  # time inside model calls
    batch_sizes: Counter[int] = field(default_factory=Counter)


@dataclass
class _Job:
    codes: Codes
    noise: Noise | None
    future: Future[Pcm]


class SnacBatcher:
    """One decode thread; windows submitted together are decoded together."""

    def __init__(
        self,
        codec: SnacCodec,
        *,
        max_batch: int = 64,
        timeout_s: float = 0.002,
        max_step: int = MAX_STEP,
    ) -> None:
        self.codec = codec
        self.max_batch, self.timeout_s, self.max_step = max_batch, timeout_s, max_step
        self.counters = DecoderCounters()
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="snac", daemon=True)
        self._thread.start()

    async def decode(self, codes: Codes, noise: Noise | None) -> Pcm:
        """Decode one window (in the next batch); cancelling the caller skips it."""
        job = _Job(codes, noise, Future())
        self._queue.put(job)
        return await asyncio.wrap_future(job.future)

    def close(self) -> None:
        """Stop the decode thread after the windows already queued."""
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while (batch := self._collect()) is not None:
            groups: dict[int, list[_Job]] = {}
            for job in batch:
                if job.future.set_running_or_notify_cancel():
                    groups.setdefault(job.codes.shape[0], []).append(job)
            for jobs in groups.values():
                self._decode(jobs)

    def _collect(self) -> list[_Job] | None:
        first = self._queue.get()
        if first is None:
            return None
        batch, deadline = [first], time.monotonic() + self.timeout_s
        while len(batch) < self.max_batch:
            try:
                job = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if job is None:
                self._queue.put(None)  # stop after this batch
                break
            batch.append(job)
        return batch

    def _decode(self, jobs: list[_Job]) -> None:
        started = time.perf_counter()
        try:
            audio = self.codec.decode([(job.codes, job.noise) for job in jobs])
        except (
            Exception
        ) as exc:  # boundary: one decoder call; each stream gets the error
            logger.exception("snac decode of %d windows failed", len(jobs))
            for job in jobs:
                job.future.set_exception(exc)
            return
        c = self.counters
        c.calls += 1
        c.windows += len(jobs)
        c.frames += sum(job.codes.shape[0] for job in jobs)
        c.busy_s += time.perf_counter() - started
        c.batch_sizes[len(jobs)] += 1
        for job, pcm in zip(jobs, audio, strict=True):
            job.future.set_result(pcm)


class SnacStream:
    """One segment's streaming decode; frames must be pushed in order."""

    def __init__(self, batcher: SnacBatcher, *, seed: int) -> None:
        self.batcher = batcher
        self.planner = WindowPlanner(max_step=batcher.max_step)
        self.store = FrameStore(
            seed=seed,
            noise_lengths=batcher.codec.noise_lengths,
            left=self.planner.left,
        )

    async def push(self, frames: Sequence[Frame]) -> list[Pcm]:
        """Audio of the frames whose right context is now complete."""
        if not frames:
            return []
        self.store.append(frames)
        return await self._decode(self.planner.add(len(frames)))

    async def finish(self) -> list[Pcm]:
        """Audio of the remaining frames (the segment ended)."""
        return await self._decode(self.planner.finish())

    async def _decode(self, windows: list[Window]) -> list[Pcm]:
        inputs = [self.store.window_input(w) for w in windows]
        decoded = await asyncio.gather(
            *(self.batcher.decode(codes, noise) for codes, noise in inputs)
        )
        return [pcm[w.keep] for w, pcm in zip(windows, decoded, strict=True)]
