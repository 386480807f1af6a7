"""Whisper on vLLM (``ASR_ENGINE=vllm``): GPU serving, and the CPU build in tests (realtime SA-9).

Each decode is one ``AsyncLLM`` request per 30 s window, so the decodes of every session in the
worker are batched by vLLM's scheduler. Finals come first: they run at a higher vLLM priority
than chunk decodes (priority scheduling policy), and no chunk decode enters the engine while a
final runs (``FinalsFirst``). A cancelled decode aborts its engine request. The decoder
prompt is built from token ids (``whisper_tokens``), never by vLLM's ``get_generation_prompt``.

Audio longer than one window is decoded window after window, each resuming at the end of the
previous window's last complete segment (as Whisper's own long-form transcription does).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import numpy as np
from django.conf import settings

from asr.whisper import MODEL_RATE, WINDOW_SAMPLES, DecodedSegment
from asr.worker.engines.base import (
    AsrDecodeRequest,
    AsrHypothesis,
    Pcm,
    new_token_limit,
)
from asr.worker.engines.tokens import average_logprob
from asr.worker.engines.vllm_config import model_directory, served_version, vllm_config
from asr.worker.engines.whisper_tokens import (
    DecodedWindow,
    TimedText,
    TokenSegment,
    WhisperVocab,
    keep_until_resume,
    split_segments,
)
from gateway.worker.vllm_runner import (
    BACKGROUND_PRIORITY,
    FINAL_PRIORITY,
    VllmRunner,
)

if TYPE_CHECKING:
    from vllm import SamplingParams

logger = logging.getLogger(__name__)

MIN_ADVANCE = MODEL_RATE  # a window that resumes sooner than this is used up instead


class FinalsFirst:
    """New chunk decodes wait while final decodes run, for at most ``hold_s`` (WK-6).

    vLLM's priority policy only orders requests waiting to be scheduled; a chunk decode that
    enters the engine while a final runs is batched with it, and on a CPU its encoder pass
    slows every step of the final. Held back for at most one chunk period, chunk decodes are
    never starved by a steady stream of finals.
    """

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self.finals = 0
        self._quiet: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self._quiet is None:  # made in the worker's loop, on first use
            self._quiet = asyncio.Event()
            self._quiet.set()
        return self._quiet

    @contextmanager
    def final(self) -> Iterator[None]:
        """Count a final decode as running."""
        quiet = self._event()
        self.finals += 1
        quiet.clear()
        try:
            yield
        finally:
            self.finals -= 1
            if not self.finals:
                quiet.set()

    async def before_chunk(self) -> None:
        """Wait until no final runs, or ``hold_s``."""
        if self.finals:
            with suppress(TimeoutError):
                await asyncio.wait_for(self._event().wait(), self.hold_s)


class VllmWhisperAsr:
    """The ``AsrEngine`` on one ``VllmRunner``."""

    name = "vllm"

    def __init__(self, runner: VllmRunner, vocab: WhisperVocab, version: str) -> None:
        self.runner = runner
        self.vocab = vocab
        self.model_version = version
        self.decode_slots = settings.ASR_VLLM_MAX_NUM_SEQS
        self.finals_first = FinalsFirst(hold_s=settings.ASR_CHUNK_S)

    @classmethod
    def load(cls) -> VllmWhisperAsr:
        """Resolve the checkpoint and start vLLM (blocking)."""
        model = model_directory()
        vocab = WhisperVocab.from_checkpoint(model)
        runner = VllmRunner.load(vllm_config(model))
        return cls(runner, vocab, served_version(model, vocab))

    async def warm_up(self) -> None:
        """One decode per mode on silence, so the first session's decodes run warm."""
        silence = np.zeros(MODEL_RATE, dtype=np.float32)
        for words in (False, True):
            await self.decode(AsrDecodeRequest(audio=silence, word_timestamps=words))

    async def decode(self, req: AsrDecodeRequest) -> AsrHypothesis:
        """Transcribe ``req.audio``; finals first; cancelling aborts the engine request."""
        if req.background:
            await self.finals_first.before_chunk()
            return await self._transcribe(req)
        with self.finals_first.final():
            return await self._transcribe(req)

    async def _transcribe(self, req: AsrDecodeRequest) -> AsrHypothesis:
        """Decode window by window, each resuming after the previous one's last segment."""
        language = req.language
        if self.vocab.multilingual and language is None:
            language = await self.detect_language(
                req.audio[:WINDOW_SAMPLES], req.background
            )
        transcript = TimedText.with_prefix(self.vocab, req.prefix)
        seek, prompt_tokens, completion_tokens = 0, 0, 0
        segments: list[DecodedSegment] = []
        while True:
            last = seek + WINDOW_SAMPLES >= len(req.audio)
            window = await self._window(req, seek, language, last=last)
            prompt_tokens = prompt_tokens or window.prompt_tokens
            completion_tokens += window.text_tokens
            transcript.add(window.segments, offset=seek / MODEL_RATE)
            segments += window.decoded(self.vocab, seek / MODEL_RATE)
            if last:
                break
            seek += max(MIN_ADVANCE, int(window.advance * MODEL_RATE))
        return AsrHypothesis(
            text=transcript.hypothesis_text(),
            words=transcript.words() if req.word_timestamps else (),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            tokens=tuple(transcript.tokens) if req.logprobs else (),
            segments=tuple(segments) if req.segments else (),
            # An English-only checkpoint, or a multilingual one told nothing, decodes English
            # (``WhisperVocab.decoder_prompt``).
            language=language or "en",
        )

    async def _window(
        self, req: AsrDecodeRequest, seek: int, language: str | None, *, last: bool
    ) -> DecodedWindow:
        """Decode the 30 s from sample ``seek``; only the first gets prompt and prefix.

        Every window but the last is decoded with timestamps, to know where the next starts.
        """
        # One window at a time: vLLM's feature extractor cuts longer audio.
        audio = req.audio[seek : seek + WINDOW_SAMPLES]
        first = seek == 0
        timestamps = req.word_timestamps or req.segments or not last
        ids = self.vocab.decoder_prompt(
            prompt=req.prompt if first else "",
            language=language,
            prefix=req.prefix if first else "",
            timestamps=timestamps,
        )
        tokens, logprobs = await self._generate(
            audio,
            ids,
            timestamps=timestamps,
            # Only when asked: vLLM computes a sampled token's rank with a torch.compile'd
            # kernel, built (C++, tens of seconds on a CPU) per new batch shape.
            logprobs=req.logprobs or req.segments,
            background=req.background,
        )
        segments, advance = self._segments(tokens, logprobs, audio, timestamps, last)
        no_speech = 0.0
        if req.segments:
            no_speech = await self._no_speech_prob(audio, ids, req.background)
        return DecodedWindow(
            segments=segments,
            advance=advance,
            prompt_tokens=len(ids),
            text_tokens=sum(t < self.vocab.eot for t in tokens),
            duration=len(audio) / MODEL_RATE,
            avg_logprob=average_logprob(logprobs),
            no_speech_prob=no_speech,
        )

    def _segments(
        self,
        tokens: list[int],
        logprobs: list[float],
        window: Pcm,
        timestamps: bool,
        last: bool,
    ) -> tuple[list[TokenSegment], float]:
        """A window's kept segments and, for all but the last, where the next starts."""
        duration = len(window) / MODEL_RATE
        if not timestamps:
            text = tuple(t for t in tokens if t < self.vocab.eot)
            probs = tuple(logprobs[: len(text)]) if logprobs else (0.0,) * len(text)
            return [TokenSegment(0.0, None, text, probs)], duration
        segments = split_segments(tokens, logprobs, self.vocab, duration=duration)
        return (segments, duration) if last else keep_until_resume(segments, duration)

    async def detect_language(self, audio: Pcm, background: bool) -> str:
        """The most likely language token of a multilingual checkpoint (SE-14)."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(
            temperature=0.0,
            max_tokens=1,
            allowed_token_ids=sorted(self.vocab.languages.values()),
            detokenize=False,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )
        output = await self.runner.complete(
            await self._render(audio, [self.vocab.sot]),
            params,
            priority=BACKGROUND_PRIORITY if background else FINAL_PRIORITY,
            kind="asr-lang",
        )
        token = output.outputs[0].token_ids[0]
        return next(k for k, v in self.vocab.languages.items() if v == token)

    async def _no_speech_prob(
        self, audio: Pcm, ids: list[int], background: bool
    ) -> float:
        """Whisper's ``no_speech_prob``: the probability of ``<|nospeech|>`` right after
        ``<|startoftranscript|>`` (openai/whisper ``decoding.py``); one sampled step whose
        only allowed token it is, its raw log probability being over the whole vocabulary."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        if self.vocab.no_speech is None:
            return 0.0
        prompt = ids[: ids.index(self.vocab.sot) + 1]
        params = SamplingParams(
            temperature=0.0,
            max_tokens=1,
            allowed_token_ids=[self.vocab.no_speech],
            logprobs=0,
            detokenize=False,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )
        output = await self.runner.complete(
            await self._render(audio, prompt),
            params,
            priority=BACKGROUND_PRIORITY if background else FINAL_PRIORITY,
            kind="asr-nospeech",
        )
        completion = output.outputs[0]
        if not completion.logprobs:
            return 0.0
        return math.exp(completion.logprobs[0][self.vocab.no_speech].logprob)

    async def _generate(
        self,
        audio: Pcm,
        ids: list[int],
        *,
        timestamps: bool,
        logprobs: bool,
        background: bool,
    ) -> tuple[list[int], list[float]]:
        """One engine request: output token ids and, when asked, their log probabilities."""
        params = self._params(ids, len(audio), timestamps=timestamps, logprobs=logprobs)
        output = await self.runner.complete(
            await self._render(audio, ids),
            params,
            priority=BACKGROUND_PRIORITY if background else FINAL_PRIORITY,
            kind="asr-chunk" if background else "asr-final",
        )
        completion = output.outputs[0]
        tokens = list(completion.token_ids)
        if not logprobs or completion.logprobs is None:
            return tokens, []
        return tokens, [
            float(completion.logprobs[i][token].logprob)
            for i, token in enumerate(tokens)
        ]

    def _params(
        self, ids: list[int], samples: int, *, timestamps: bool, logprobs: bool
    ) -> SamplingParams:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        return SamplingParams(
            temperature=0.0,
            max_tokens=new_token_limit(samples, len(ids), self.vocab.max_length),
            logprobs=0 if logprobs else None,
            extra_args={"whisper": self.vocab.rules(ids, timestamps=timestamps)},
            detokenize=False,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )

    async def _render(self, audio: Pcm, ids: list[int]) -> Any:
        """The engine input, with exactly ``ids`` as the decoder prompt.

        vLLM puts ``<|startoftranscript|>`` in front of a decoder prompt that does not begin
        with it, which would break a ``<|startofprev|>`` prompt; rendering first (feature
        extraction runs in vLLM's renderer thread) and replacing the ids avoids that.
        """
        from vllm.renderers.inputs.preprocess import parse_model_prompt

        engine = self.runner.engine
        prompt = {
            "encoder_prompt": {
                "prompt": "",
                "multi_modal_data": {
                    "audio": (np.ascontiguousarray(audio, np.float32), MODEL_RATE)
                },
            },
            "decoder_prompt": {"prompt_token_ids": ids},
        }
        parsed = parse_model_prompt(engine.model_config, prompt)
        (rendered,) = await engine.renderer.render_cmpl_async([parsed])
        rendered["decoder_prompt"]["prompt_token_ids"] = list(ids)
        return rendered

    def close(self) -> None:
        """Shut vLLM down."""
        self.runner.close()
