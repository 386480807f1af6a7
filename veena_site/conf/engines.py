"""Settings of the worker side: which engines run, their slots and threads, vLLM and SNAC.

Read by ``veena_site.runtime``, ``tts.worker.engines``, ``asr.worker.engines`` and the worker-side jobs;
how the engines decode (Piper's runs, streaming ASR) is ``conf/decoding.py``.
"""

from __future__ import annotations

import os

from veena_site.conf.backbone import WORKER_CHANNEL_CAPACITY
from veena_site.conf.registry import Group

CPU_COUNT = os.cpu_count() or 1

_engines = Group(
    __name__,
    "The worker: engines, slots, threads, decoding",
    "See [vLLM engines](engines.md) and [Benchmarks](benchmarks.md).",
)
TTS_ENGINE = _engines.env(
    "TTS_ENGINE",
    str,
    "piper",
    "`piper`, `vllm` (engine `vllm-snac`, needs `make vllm`) or `fake` (tests)",
)
ASR_ENGINE = _engines.env(
    "ASR_ENGINE",
    str,
    "faster_whisper",
    "`faster_whisper`, `vllm` (Whisper on vLLM, docs/engines.md) or `fake` (tests)",
)
# tts Q1: Piper 8 per core; vllm-snac 4 until a measured run says otherwise (engines §5.7).
TTS_WORKER_SLOTS = _engines.env(
    "TTS_WORKER_SLOTS",
    int,
    4 if TTS_ENGINE == "vllm" else 8 * CPU_COUNT,
    "concurrent TTS jobs per worker",
    shown="8 per core; `4` with `TTS_ENGINE=vllm`",
)
ASR_WORKER_SLOTS = _engines.env(
    "ASR_WORKER_SLOTS", int, 16, "concurrent realtime sessions per worker"
)
ENGINE_THREADS = _engines.env(
    "ENGINE_THREADS",
    int,
    CPU_COUNT,
    "engine thread pool size (ASR: final and chunk decodes at once, each)",
    shown="the core count",
)
# Each worker's own channel ("worker.", veena_site.worker) takes every running job's acks,
# keepalives, cancels and ASR audio. At the shared default it filled at ~40 concurrent jobs;
# ProcessChannelLayer gives the prefix its own capacity without starving it behind the
# consumers' channels.
WORKER_CHANNEL_PER_JOB = 16
WORKER_OWN_CHANNEL_CAPACITY = _engines.constant(
    "WORKER_OWN_CHANNEL_CAPACITY",
    max(
        WORKER_CHANNEL_CAPACITY,
        WORKER_CHANNEL_PER_JOB * (TTS_WORKER_SLOTS + ASR_WORKER_SLOTS),
    ),
    "capacity of each worker's own channel (`worker.*`), which takes every running"
    " job's acks, keepalives, cancels and ASR audio: at least 16 messages per slot",
    shown="16 × (`TTS_WORKER_SLOTS` + `ASR_WORKER_SLOTS`), at least"
    " `WORKER_CHANNEL_CAPACITY`",
)
FAKE_TTS_CHUNK_DELAY_S = _engines.constant(
    "FAKE_TTS_CHUNK_DELAY_S",
    0.0,
    "tests only: seconds the fake TTS engine waits per 100 ms chunk",
)
TTS_SEGMENT_PAUSE_MS = _engines.constant(
    "TTS_SEGMENT_PAUSE_MS",
    None,
    "silence joined between segments; unset: the engine's default (piper 0, vllm-snac 80)",
    type=int,
)

# TTS_ENGINE=vllm: a Veena/Orpheus-style checkpoint on vLLM, decoded by SNAC (engines §5).
# Both models are local directories; nothing is downloaded.
TTS_VLLM_MODEL = _engines.env(
    "TTS_VLLM_MODEL",
    str,
    "",
    "`TTS_ENGINE=vllm`: local checkpoint directory (a Llama with `tokenizer.json`)",
)
TTS_VLLM_RECIPE = _engines.env(
    "TTS_VLLM_RECIPE", str, "veena", "prompt recipe (`veena` or `orpheus`)"
)
TTS_VLLM_VOICES = _engines.env(
    "TTS_VLLM_VOICES",
    list,
    [],
    "voices to serve; empty: the recipe's voices (the worker refuses voices the"
    " tokenizer lacks)",
)
TTS_VLLM_DTYPE = _engines.env(
    "TTS_VLLM_DTYPE", str, "auto", "vLLM engine argument `dtype`"
)
TTS_VLLM_MAX_NUM_SEQS = _engines.env(
    "TTS_VLLM_MAX_NUM_SEQS",
    int,
    TTS_WORKER_SLOTS,
    "vLLM engine argument `max_num_seqs`",
    shown="`TTS_WORKER_SLOTS`",
)
TTS_VLLM_KV_CACHE_GIB = _engines.env("TTS_VLLM_KV_CACHE_GIB", int, 4, "KV cache size")
TTS_SNAC_MODEL = _engines.env(
    "TTS_SNAC_MODEL",
    str,
    "",
    "`TTS_ENGINE=vllm`: local SNAC 24 kHz directory (`config.json` +"
    " `pytorch_model.bin`)",
)
TTS_VLLM_MAX_MODEL_LEN = _engines.constant(
    "TTS_VLLM_MAX_MODEL_LEN", 4096, "vLLM engine argument `max_model_len`"
)
TTS_VLLM_ENFORCE_EAGER = _engines.constant(
    "TTS_VLLM_ENFORCE_EAGER",
    None,
    "CUDA graphs off (true) / on (false); unset: eager without CUDA, CUDA graphs with it",
    type=bool,
)
TTS_VLLM_FORCE_SLOT_ORDER = _engines.constant(
    "TTS_VLLM_FORCE_SLOT_ORDER",
    False,
    "sample only the next slot's audio ids (a constraint; the tiny test model needs it)",
)
TTS_VLLM_CPU_THREADS_BIND = _engines.constant(
    "TTS_VLLM_CPU_THREADS_BIND",
    "auto",
    "`VLLM_CPU_OMP_THREADS_BIND` of the CPU build (`auto` gives vLLM's worker one core)",
)
TTS_SNAC_RANDOM_INIT = _engines.constant(
    "TTS_SNAC_RANDOM_INIT",
    False,
    "random SNAC weights when the directory has only `config.json` (tests and"
    " benchmarks only)",
)
TTS_SNAC_DEVICE = _engines.constant(
    "TTS_SNAC_DEVICE", "auto", "`auto`: `cuda` when available"
)
TTS_SNAC_NOISE = _engines.constant(
    "TTS_SNAC_NOISE", True, "decoder noise (seeded per request)"
)
TTS_SNAC_MAX_BATCH = _engines.constant(
    "TTS_SNAC_MAX_BATCH", 64, "windows per batched decode call"
)
TTS_SNAC_BATCH_TIMEOUT_MS = _engines.constant(
    "TTS_SNAC_BATCH_TIMEOUT_MS", 2.0, "wait for more windows before a batched decode"
)
TTS_SNAC_MAX_STEP = _engines.constant(
    "TTS_SNAC_MAX_STEP",
    0,
    "most frames one window emits when the decoder lags; 0: 1 on CUDA (windows then"
    " never depend on token timing, so seeded audio repeats exactly), 8 on CPU (fewer,"
    " longer decodes)",
)
TTS_SNAC_THREADS = _engines.constant(
    "TTS_SNAC_THREADS",
    max(1, CPU_COUNT - 1),
    "torch threads on CPU",
    shown="cores − 1 (at least 1)",
)

# ASR_ENGINE=vllm: Whisper on vLLM (docs/specs/engines.md §3-4). ASR_VLLM_ENGINE_ARGS wins
# over every argument below (gateway.worker.vllm_runner.VllmConfig), constants included.
ASR_VLLM_MODEL = _engines.env(
    "ASR_VLLM_MODEL",
    str,
    "",
    "local Hugging Face Whisper checkpoint directory; unset: the bundled tiny.en,"
    " converted once into `DATA_DIR/models/whisper-tiny.en`",
)
ASR_VLLM_MAX_NUM_SEQS = _engines.env(
    "ASR_VLLM_MAX_NUM_SEQS",
    int,
    16,
    "engine requests batched at once (also the worker's concurrent final and chunk"
    " decodes)",
)
ASR_VLLM_KV_CACHE_GIB = _engines.env(
    "ASR_VLLM_KV_CACHE_GIB",
    float,
    1.0,
    "KV cache of this engine (`kv_cache_memory_bytes`, CPU and GPU)",
)
ASR_VLLM_ENGINE_ARGS = _engines.env(
    "ASR_VLLM_ENGINE_ARGS",
    dict,
    {},
    'JSON: further `AsyncEngineArgs`, over the others, e.g. `{"tensor_parallel_size":'
    ' 2}` or `{"dtype": "float16", "enforce_eager": false}`',
)
ASR_VLLM_DTYPE = _engines.constant(
    "ASR_VLLM_DTYPE", "auto", "vLLM `dtype` (`ASR_VLLM_ENGINE_ARGS` sets another)"
)
ASR_VLLM_MAX_MODEL_LEN = _engines.constant(
    "ASR_VLLM_MAX_MODEL_LEN",
    None,
    "vLLM `max_model_len`; unset: the checkpoint's (448)",
    type=int,
)
ASR_VLLM_MAX_NUM_BATCHED_TOKENS = _engines.constant(
    "ASR_VLLM_MAX_NUM_BATCHED_TOKENS",
    None,
    "scheduler budget; unset: vLLM's",
    type=int,
)
ASR_VLLM_ENFORCE_EAGER = _engines.constant(
    "ASR_VLLM_ENFORCE_EAGER", True, "eager mode (no compile/CUDA graphs)"
)
ASR_VLLM_PRIORITY = _engines.constant(
    "ASR_VLLM_PRIORITY", True, "finals before chunk decodes (priority scheduling)"
)
