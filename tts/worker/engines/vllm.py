"""Veena/Orpheus TTS on vLLM: Llama → SNAC token ids → frames → 24 kHz audio (engines §5).

Each segment is one ``AsyncLLM`` request with ``prompt_token_ids`` and DELTA outputs of token
ids (no tokenizer in vLLM, no detokenisation). The ids go through the frame parser; complete
frames go to the worker's one shared SNAC decoder through a ``SnacStream``. Closing or cancelling
the stream aborts the vLLM request (``AsyncLLM.generate`` aborts on ``GeneratorExit`` and
``CancelledError``); the engine records how long each abort took.

vLLM and torch are imported only in ``load`` (STYLE 34), after ``prepare_vllm``. The engine core
runs in a spawned child process, so the process's main module must be import-safe.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.worker.vllm_runner import ENGINES
from tts.orpheus.snac_tokens import SNAC_RATE, VOCAB_MIN, FrameParser
from tts.orpheus.vllm_config import WIRE_NAME, VllmTtsConfig
from tts.orpheus.vllm_prompts import token_budget
from tts.worker.engines.base import Pcm, TtsEngineRequest
from tts.worker.engines.snac_decoder import SnacBatcher, SnacCodec, SnacStream
from tts.worker.engines.snac_slots import EXTRA_ARG, STOP_IDS_ARG
from tts.worker.engines.snac_window import MAX_STEP
from tts.worker.engines.word_marks import estimate_marks

logger = logging.getLogger(__name__)

SLOT_ORDER_PROCESSOR = "tts.worker.engines.snac_slots:SlotOrder"
ABORTS_KEPT = 256


@dataclass
class EngineLog:
    """What the engine did with its vLLM requests (tests and logs read it)."""

    requests: int = 0
    aborts: int = 0
    # The latest aborts: request id → ms from the stream's stop to the abort sent to vLLM.
    aborted: OrderedDict[str, float] = field(default_factory=OrderedDict)

    def abort_took(self, request_id: str, ms: float) -> None:
        """Record one abort, keeping the latest ABORTS_KEPT."""
        self.aborts += 1
        self.aborted[request_id] = ms
        while len(self.aborted) > ABORTS_KEPT:
            self.aborted.popitem(last=False)


class VllmSnacTts:
    """One AsyncLLM and one SNAC decoder per worker process, shared by every slot."""

    name = WIRE_NAME
    native_rate = SNAC_RATE
    supports_speed = False

    def __init__(
        self,
        *,
        config: VllmTtsConfig,
        llm: Any,
        encode: Any,
        batcher: SnacBatcher,
    ) -> None:
        self.config = config
        self.model_version = config.model_version
        self.voices = config.voices
        self.default_voice = config.default_voice
        self.llm = llm
        self.batcher = batcher
        self.log = EngineLog()
        self._encode = encode

    @classmethod
    def load(cls, config: VllmTtsConfig) -> VllmSnacTts:
        """Load SNAC and the checkpoint (blocking, tens of seconds); both must succeed."""
        started = time.monotonic()
        _prepare_environment(config)
        batcher = None
        try:
            encode = _checkpoint_tokenizer(config)
            batcher = _load_snac(config)
            llm = _start_llm(config)
        except BaseException:
            if batcher is not None:
                batcher.close()
            raise
        engine = cls(config=config, llm=llm, encode=encode, batcher=batcher)
        logger.info(
            "vllm-snac %s (%s recipe, voices %s) loaded in %.1f s",
            config.model,
            config.recipe.name,
            ",".join(config.voices),
            time.monotonic() - started,
        )
        return engine

    async def stream(self, req: TtsEngineRequest) -> AsyncGenerator[Pcm, None]:
        """Generate one segment and yield its audio window by window."""
        prompt = self.prompt(req)
        params = self.sampling_params(req, len(prompt))
        request_id = f"tts-{uuid.uuid4().hex}"
        parser = FrameParser(self.config.recipe.stop_ids)
        seed = req.seed if req.seed is not None else secrets.randbits(32)
        snac = SnacStream(self.batcher, seed=seed)
        self.log.requests += 1
        outputs = self.llm.generate(
            {"prompt_token_ids": prompt}, params, request_id=request_id
        )
        finished = False
        if (
            req.word_timestamps
        ):  # before any audio: an estimate (tts.worker.engines.word_marks)
            req.words.extend(estimate_marks(req.text, rate=SNAC_RATE, speed=req.speed))
        try:
            async for out in outputs:
                completion = out.outputs[0]
                for pcm in await snac.push(parser.feed(completion.token_ids)):
                    yield pcm
                if out.finished:
                    finished = True
                    req.stats.truncated = completion.finish_reason == "length"
            parser.finish()
            for pcm in await snac.finish():
                yield pcm
        finally:
            if not finished:
                await self._abort(outputs, request_id)
            c = parser.counters
            req.stats.tokens = c.tokens
            req.stats.snac_frames = c.frames
            req.stats.frames_dropped = c.frames_dropped
            req.stats.tokens_ignored = c.ignored

    def close(self) -> None:
        """Stop the engine core and the decode thread."""
        llm, self.llm = self.llm, None
        if llm is not None:
            ENGINES.shutdown(llm)
            # Collected now: AsyncLLM.__del__ shuts down again, which fails at interpreter exit.
            del llm
        self.batcher.close()

    async def _abort(self, outputs: Any, request_id: str) -> None:
        """Close the request's output stream, which aborts it in vLLM (Z2)."""
        started = time.perf_counter()
        # generate() aborts the request, unless it already did (cancelled inside it).
        await outputs.aclose()
        self.log.abort_took(request_id, (time.perf_counter() - started) * 1000)

    def prompt(self, req: TtsEngineRequest) -> list[int]:
        """The segment's ``prompt_token_ids`` by the checkpoint's recipe."""
        return self.config.recipe.prompt_ids(self._encode, req.voice, req.text)

    def sampling_params(self, req: TtsEngineRequest, prompt_len: int) -> Any:
        """The request's sampling fields and seed as vLLM ``SamplingParams``."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        stop_ids = list(self.config.recipe.stop_ids)
        room = self.config.max_model_len - prompt_len
        if room < 1:
            raise ValueError("segment prompt exceeds TTS_VLLM_MAX_MODEL_LEN")
        extra = {EXTRA_ARG: True, STOP_IDS_ARG: stop_ids}
        return SamplingParams(
            temperature=req.temperature,
            top_k=req.top_k,
            top_p=req.top_p,
            repetition_penalty=req.repetition_penalty,
            max_tokens=min(req.max_tokens, token_budget(req.text), room),
            seed=req.seed,
            stop_token_ids=stop_ids,
            detokenize=False,
            output_kind=RequestOutputKind.DELTA,
            extra_args=extra if self.config.force_slot_order else None,
        )


def _prepare_environment(config: VllmTtsConfig) -> None:
    """vLLM's environment (gateway.worker.vllm_env) and its thread binding; the ZMQ socket
    directory is the process's one ``gateway.worker.vllm_runner.IPC``, shared with the ASR engine."""
    from gateway.worker.vllm_env import prepare_vllm

    prepare_vllm(what="TTS_ENGINE=vllm", data_dir=config.data_dir)
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", config.cpu_threads_bind)
    # Never fork a worker that already runs threads (slot pool, SNAC, channel layer).
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")


def _checkpoint_tokenizer(config: VllmTtsConfig) -> Any:
    """The checkpoint's text tokenizer as ``text → ids``; refuses voices it does not have."""
    from tokenizers import Tokenizer

    for name, directory in (
        ("TTS_VLLM_MODEL", config.model),
        ("TTS_SNAC_MODEL", config.snac),
    ):
        if directory == Path() or not directory.is_dir():
            raise FileNotFoundError(f"{name} must name a local model directory")
    path = config.model / "tokenizer.json"
    if not path.exists():
        raise FileNotFoundError(f"TTS_VLLM_MODEL has no {path.name}: {config.model}")
    tokenizer = Tokenizer.from_file(str(path))
    missing = [
        voice
        for voice in config.voices
        if (token := config.recipe.voice_token(voice)) is not None
        and tokenizer.token_to_id(token) is None
    ]
    if missing:
        raise ValueError(
            f"TTS_VLLM_VOICES: the checkpoint has no voice token for {', '.join(missing)}"
        )

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    return encode


def _load_snac(config: VllmTtsConfig) -> SnacBatcher:
    import torch

    device = config.snac_device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    codec = SnacCodec.load(
        config.snac,
        random_init=config.snac_random_init,
        device=device,
        noise=config.snac_noise,
        threads=config.snac_threads,
    )
    codec.warm_up()
    return SnacBatcher(
        codec,
        max_batch=config.snac_max_batch,
        timeout_s=config.snac_batch_timeout_ms / 1000,
        max_step=config.snac_max_step or (1 if device == "cuda" else MAX_STEP),
    )


def _start_llm(config: VllmTtsConfig) -> Any:
    import torch
    from vllm import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    eager = config.enforce_eager
    if eager is None:
        eager = not torch.cuda.is_available()
    args = AsyncEngineArgs(
        model=str(config.model),
        skip_tokenizer_init=True,
        dtype=config.dtype,
        max_model_len=config.max_model_len,
        max_num_seqs=config.max_num_seqs,
        enforce_eager=eager,
        kv_cache_memory_bytes=config.kv_cache_gib * 2**30,
        logits_processors=[SLOT_ORDER_PROCESSOR] if config.force_slot_order else None,
        disable_log_stats=True,
    )
    llm = ENGINES.start(lambda: AsyncLLM.from_engine_args(args))
    vocab = llm.model_config.get_vocab_size()
    if vocab < VOCAB_MIN:
        ENGINES.shutdown(llm)
        raise ValueError(f"TTS_VLLM_MODEL vocabulary {vocab} misses the audio ids")
    return llm
