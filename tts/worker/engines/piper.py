"""Piper TTS on CPU: the bundled en_US-joe-medium voice, one sentence per chunk."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import onnxruntime
from onnxruntime.capi.onnxruntime_pybind11_state import Fail
from piper.voice import PiperVoice

from gateway.worker.threads import engine_threads
from tts.worker.engines.base import Pcm, TtsEngineRequest
from tts.worker.engines.clauses import cut_first_clause
from tts.worker.engines.piper_lanes import Lanes, Run, Spoken, ran
from tts.worker.engines.piper_sessions import (
    Demand,
    SessionPool,
    run_options,
    share_of_budget,
    trim_heap,
)
from tts.worker.engines.piper_split import (
    DEFAULT_CACHE,
    Latent,
    SplitSession,
    pieces,
    run_timed,
)
from tts.worker.engines.piper_voice import build_voice, postprocess
from tts.worker.engines.piper_words import (
    SentenceClock,
    marked,
    segment_clock,
    word_phonemes,
)

logger = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")
# A sentence's latent and the frames of it not decoded yet.
_Rest = tuple[Latent, tuple[int, int]]
# What a stream's first pool task finds: its sentences' phonemes, its first audio, the
# rest of its first sentence, and the clock of its word marks (when asked for).
_Opening = tuple[list[list[str]], Spoken | None, _Rest | None, SentenceClock | None]
WORD_CACHE = 8192  # words whose own phonemes are kept (issue 35)

WARMUP_TEXT = "Ready."
# Seconds without a stream before the runs' memory goes back to the OS (return_memory):
# the next stream faults it in again, +20-40 ms first audio for a lone stream (issue 13).
RELEASE_IDLE_S = 10.0
# A leading segment's first sentence is cut at a clause mark leaving this many phonemes on
# both sides (tts/worker/engines/clauses.py); 0: never (the default, TTS_PIPER_FIRST_CLAUSE_PHONEMES).
FIRST_CLAUSE_PHONEMES = 0
# A leading segment's first sentence is decoded in two pieces, the first this many latent
# frames (256 samples, ~12 ms each), so its first audio waits for part of the decoder
# (tts/worker/engines/piper_split.py); 0: whole (TTS_PIPER_FIRST_PIECE_FRAMES).
FIRST_PIECE_FRAMES = 32


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
        first_piece: int = 0,
        side_by_side: bool = True,
    ) -> None:
        self._voice = voice
        self._first_clause = first_clause
        self._first_piece = first_piece  # > 0 only on SplitSessions
        self._side_by_side = side_by_side
        self._return_memory = return_memory
        self._release_idle_s = release_idle_s
        self._idle: asyncio.TimerHandle | None = None  # the pending release_memory
        self._pool = pool
        self._executor = executor
        self._demand = demand or Demand(0.0)  # streams between first and last sentence
        self.native_rate: int = voice.config.sample_rate
        self._word_phonemes = functools.lru_cache(WORD_CACHE)(
            functools.partial(word_phonemes, voice)
        )

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
        first_piece: int = FIRST_PIECE_FRAMES,
        split_cache: Path = DEFAULT_CACHE,
        side_by_side: bool = True,
    ) -> PiperTts:
        """Load the voice for ``threads`` cores (slot threads and the ONNX thread budget).

        ``session_threads`` lists the sessions' intra-op thread counts (default: all and one);
        a run's share of the cores counts the most streams of the last ``share_hold_s``;
        ``spinning``: a wide session's threads spin between a run's ops (never after it);
        ``return_memory``: the runs' working memory goes back to the OS once no stream has
        been in the engine for ``release_idle_s`` (``release_memory``);
        ``first_clause``: a leading segment's first sentence is cut after a clause mark with
        at least this many phonemes on both sides (0: never);
        ``first_piece``: a leading segment's first sentence is decoded in two pieces, the
        first this many latent frames (0: whole); the sessions run the model as its two
        parts (kept in ``split_cache``), whose encoder also gives the phoneme durations
        that time the words (issue 35);
        ``side_by_side``: a lone stream's runs after its first go side by side, one thread
        each, as many as cores (else one at a time at the stream's share).
        """
        started = time.monotonic()
        size = threads or engine_threads()
        voice, pool = build_voice(
            size,
            session_threads,
            spinning=spinning,
            wait_for_cores=wait_for_cores,
            split=split_cache,
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
            first_piece=first_piece,
            side_by_side=side_by_side,
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
        sentence in two clauses when it is long: ``first_clause``; and its first decoder
        piece apart: ``first_piece``), with its words in ``req.words`` when asked.

        The first sentence runs in the pool task that phonemizes the text, so its run never
        waits on the event loop. The runs after it go side by side while the stream is alone
        (``piper_lanes.Lanes``), else one at a time, each once the caller asks for its audio.
        """
        loop = asyncio.get_running_loop()
        if self._idle is not None:
            self._idle.cancel()
        self._demand.enter()
        scales = self._scales(req.speed)
        try:
            # streams that start in the same turn of the loop count each other
            await asyncio.sleep(0)
            sentences, first, rest, clock = await self._in_pool(
                self._speak_first, req.text, req.leading, scales, req.word_timestamps
            )
            work: list[Run] = [functools.partial(self._decode, *rest)] if rest else []
            work += [
                functools.partial(self._synthesize, phonemes, scales)
                for phonemes in sentences[1:]
            ]
            runs = Lanes(self._executor, work, self._lanes)  # they start now
            try:
                spoken = ran(first) if sentences else await runs.next()
                while spoken is not None:
                    yield marked(spoken, clock, req)
                    spoken = await runs.next()
            finally:
                runs.stop()
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

    def _lanes(self) -> int:
        """Runs a stream may have going at once: every core's while it is alone."""
        alone = self._side_by_side and self._demand.current() <= 1
        return self._pool.budget if alone else 1

    def _speak_first(
        self,
        text: str,
        leading: bool,
        scales: npt.NDArray[np.float32],
        words: bool,
        options: onnxruntime.RunOptions,
    ) -> _Opening:
        """Phonemize ``text`` and synthesize its first sentence, in one pool task: the whole
        sentence, or for a leading segment its first decoder piece and what the rest needs;
        with ``words``, also the clock that times the words (issue 35)."""
        sentences = [phonemes for phonemes in self._voice.phonemize(text) if phonemes]
        if leading:
            sentences = cut_first_clause(sentences, self._first_clause)
        if not sentences:
            return [], None, None, None
        clock = (
            segment_clock(self._voice, text, sentences, self._word_phonemes)
            if words
            else None
        )
        if not (leading and self._first_piece):
            return (
                sentences,
                self._synthesize(sentences[0], scales, options),
                None,
                clock,
            )
        inputs = self._inputs(sentences[0], scales)

        def first_piece(session: SplitSession) -> tuple[Spoken, _Rest | None]:
            latent, durations = session.encode_timed(inputs, options)
            head, *rest = pieces(latent.shape[2], self._first_piece)
            pcm = postprocess(session.decode(latent, *head, options))
            return Spoken(pcm, durations), ((latent, rest[0]) if rest else None)

        done = self._leased(first_piece, options)
        if done is None:
            return sentences, None, None, clock
        return sentences, done[0], done[1], clock

    def _decode(
        self,
        latent: Latent,
        span: tuple[int, int],
        options: onnxruntime.RunOptions,
        want: int | None = None,
    ) -> Spoken | None:
        """The frames ``span`` of a sentence's latent; None: terminated."""
        audio = self._leased(lambda s: s.decode(latent, *span, options), options, want)
        if audio is None:
            return None
        return Spoken(postprocess(audio), starts_sentence=False)

    def _synthesize(
        self,
        phonemes: list[str],
        scales: npt.NDArray[np.float32],
        options: onnxruntime.RunOptions,
        want: int | None = None,
    ) -> Spoken | None:
        """Run the model on one sentence on at most ``want`` threads (default: the run's
        share of the cores as it starts); None: terminated."""
        inputs = self._inputs(phonemes, scales)
        spoken = self._leased(lambda s: run_timed(s, inputs, options), options, want)
        if spoken is None:
            return None
        audio, durations = spoken
        return Spoken(postprocess(audio), durations)

    def _inputs(
        self, phonemes: list[str], scales: npt.NDArray[np.float32]
    ) -> dict[str, npt.NDArray[Any]]:
        """The model's inputs for one sentence."""
        ids = np.array([self._voice.phonemes_to_ids(phonemes)], dtype=np.int64)
        return {
            "input": ids,
            "input_lengths": np.array([ids.shape[1]], dtype=np.int64),
            "scales": scales,
        }

    def _leased(
        self,
        work: Callable[[Any], R],
        options: onnxruntime.RunOptions,
        want: int | None = None,
    ) -> R | None:
        """``work(session)`` on a session of at most ``want`` threads (default: the run's
        share of the cores as it starts); None when ``options`` terminated it."""
        if want is None:
            want = share_of_budget(self._pool.budget, self._demand.current())
        with self._pool.lease(want) as session:
            if options.terminate:  # cancelled while waiting for cores
                return None
            try:
                return work(session)
            except Fail:
                if options.terminate:
                    logger.debug("piper run terminated by cancellation")
                    return None
                raise

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
