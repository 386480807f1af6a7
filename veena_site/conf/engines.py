"""Settings of the worker side: which engines run, their slots and threads, how they decode.

Read by ``veena_site.runtime``, ``tts.engines``, ``asr.engines`` and the worker-side jobs
(``tts.jobs``, ``asr.jobs``); the gateway-side limits of each endpoint are in
``veena_site/settings.py``.
"""

from __future__ import annotations

import os

from veena_site.conf.environment import env

TTS_ENGINE = env("TTS_ENGINE", default="piper")
ASR_ENGINE = env("ASR_ENGINE", default="faster_whisper")
CPU_COUNT = os.cpu_count() or 1
# tts Q1: Piper 8 per core; vllm-snac 4 until a measured run says otherwise (engines §5.7).
TTS_WORKER_SLOTS = env.int(
    "TTS_WORKER_SLOTS", default=4 if TTS_ENGINE == "vllm" else 8 * CPU_COUNT
)
ASR_WORKER_SLOTS = env.int("ASR_WORKER_SLOTS", default=16)
ENGINE_THREADS = env.int("ENGINE_THREADS", default=CPU_COUNT)
# Test-only knob: seconds the fake TTS engine waits per 100 ms chunk.
FAKE_TTS_CHUNK_DELAY_S = env.float("FAKE_TTS_CHUNK_DELAY_S", default=0.0)

# Piper's ONNX sessions by intra-op threads (issue 13): empty = ENGINE_THREADS and 1, so a lone
# stream uses every core and many streams one each; a 1-thread session is always added.
TTS_PIPER_SESSION_THREADS = [
    int(n) for n in env.list("TTS_PIPER_SESSION_THREADS", default=[])
]
# A wide session's threads spin between a run's ops, and stop when it ends (2026-12-05: off,
# its runs took 1.06-1.07x as long; spinning on after the run, as before, cost two streams
# 12-18 % when one had just run wide). On by default only in the embedded topology, where the
# engine owns the machine's cores: beside other workers and gateways on one host (REDIS_URL,
# tests/e2e/test_scaleout.py) the spinning threads take the cores the others need.
TTS_PIPER_SPINNING = env.bool(
    "TTS_PIPER_SPINNING", default=not env("REDIS_URL", default="")
)
TTS_PIPER_WAIT_FOR_CORES = env.bool("TTS_PIPER_WAIT_FOR_CORES", default=True)
TTS_PIPER_SHARE_HOLD_S = env.float("TTS_PIPER_SHARE_HOLD_S", default=1.0)
# Piper's working memory back to the OS once no stream has been in the engine for
# TTS_PIPER_RELEASE_IDLE_S (each session's ONNX arena shrunk by one warm-up run, then
# malloc_trim). The next stream faults it in again: +20-40 ms first audio for a lone stream
# (2026-12-05), so a pause of a conversation's length keeps it.
TTS_PIPER_RETURN_MEMORY = env.bool("TTS_PIPER_RETURN_MEMORY", default=True)
TTS_PIPER_RELEASE_IDLE_S = env.float("TTS_PIPER_RELEASE_IDLE_S", default=10.0)
# A request's first sentence is cut after a clause mark (, ; :) leaving at least this many
# phonemes on both sides, so its first audio waits for a clause, not a sentence; 0: never.
# Off by default (2026-12-05): round-trip WER 3.3 % cut against 3.5 % whole (26 texts x 10
# Piper readings through tiny.en), but the first clause ends with a sentence's fall (Whisper
# writes "o'clock. Or maybe" for "o'clock, or maybe") and streaming Whisper on vLLM misread the
# 40 s test item made that way (WER 0.28 and 0.53, against 0.000 whole).
TTS_PIPER_FIRST_CLAUSE_PHONEMES = env.int("TTS_PIPER_FIRST_CLAUSE_PHONEMES", default=0)
# A request's first sentence is decoded in two pieces, the first this many latent frames
# (~12 ms of audio each), so its first audio waits for the encoder and part of the decoder;
# the samples are those of a whole decode (tts/engines/piper_split.py); 0: whole.
TTS_PIPER_FIRST_PIECE_FRAMES = env.int("TTS_PIPER_FIRST_PIECE_FRAMES", default=32)
# A lone stream's runs after its first (the first audio's, on every core) go side by side on
# one thread each, as many as cores: two one-thread runs do 1.17x the work of one two-thread
# run on 2 vCPUs. Each starts as soon as a lane is free, not when its audio is asked for.
TTS_PIPER_SIDE_BY_SIDE = env.bool("TTS_PIPER_SIDE_BY_SIDE", default=True)
# Unset: the engine's default (piper 0, vllm-snac 80).
TTS_SEGMENT_PAUSE_MS = env.int("TTS_SEGMENT_PAUSE_MS", default=None)

# TTS_ENGINE=vllm: a Veena/Orpheus-style checkpoint on vLLM, decoded by SNAC (engines §5).
# Both models are local directories; nothing is downloaded.
TTS_VLLM_MODEL = env("TTS_VLLM_MODEL", default="")
TTS_VLLM_RECIPE = env("TTS_VLLM_RECIPE", default="veena")  # veena | orpheus
TTS_VLLM_VOICES = env.list("TTS_VLLM_VOICES", default=[])  # empty: the recipe's voices
TTS_VLLM_DTYPE = env("TTS_VLLM_DTYPE", default="auto")
TTS_VLLM_MAX_NUM_SEQS = env.int("TTS_VLLM_MAX_NUM_SEQS", default=TTS_WORKER_SLOTS)
TTS_VLLM_MAX_MODEL_LEN = env.int("TTS_VLLM_MAX_MODEL_LEN", default=4096)
TTS_VLLM_KV_CACHE_GIB = env.int("TTS_VLLM_KV_CACHE_GIB", default=4)
# Unset: eager on CPU, CUDA graphs on a GPU.
TTS_VLLM_ENFORCE_EAGER = env.bool("TTS_VLLM_ENFORCE_EAGER", default=None)
# Sample only the next slot's audio ids (a constraint; the tiny test model needs it).
TTS_VLLM_FORCE_SLOT_ORDER = env.bool("TTS_VLLM_FORCE_SLOT_ORDER", default=False)
# VLLM_CPU_OMP_THREADS_BIND for the CPU build: "auto" gives vLLM's worker one core.
TTS_VLLM_CPU_THREADS_BIND = env("TTS_VLLM_CPU_THREADS_BIND", default="auto")
TTS_SNAC_MODEL = env("TTS_SNAC_MODEL", default="")
# Random weights when the directory has only config.json: tests and benchmarks only.
TTS_SNAC_RANDOM_INIT = env.bool("TTS_SNAC_RANDOM_INIT", default=False)
TTS_SNAC_DEVICE = env("TTS_SNAC_DEVICE", default="auto")  # auto: cuda when available
TTS_SNAC_NOISE = env.bool("TTS_SNAC_NOISE", default=True)
TTS_SNAC_MAX_BATCH = env.int("TTS_SNAC_MAX_BATCH", default=64)
TTS_SNAC_BATCH_TIMEOUT_MS = env.float("TTS_SNAC_BATCH_TIMEOUT_MS", default=2.0)
# Most frames one window emits when the decoder lags; 0: 1 on CUDA (windows then never depend
# on token timing, so seeded audio repeats exactly), 8 on CPU (fewer, longer decodes).
TTS_SNAC_MAX_STEP = env.int("TTS_SNAC_MAX_STEP", default=0)
TTS_SNAC_THREADS = env.int("TTS_SNAC_THREADS", default=max(1, CPU_COUNT - 1))

# How a streaming ASR job decodes (asr.jobs). The WERs quoted here are of bench/asr.py's first
# corpus, four items (69 words, a misheard word 1.4 points); docs/benchmarks.md has the
# sixteen-item corpus' (defaults 6.4 %, engine alone 2.6 %). ASR_CHUNK_S is the cadence while
# other decodes run: 0.6 s (ASR_AGREE_S, so each hypothesis can confirm the previous one's
# words) showed the first delta at 4 sessions 1.91 s after speech start instead of 2.48-2.51 s
# at 1.0 s, words shown by speech end 68 % instead of 44-54 %, WER unchanged; at 16 sessions
# commit→completed p95 7.5-8.1 s against 7.2-7.3 s (a saturated machine's noise, not shown
# better); 0.4 s worse at 4 (1.9 % WER, 2.22 s: the decodes crowd each other) (bench/asr.py,
# 2 vCPU AMD EPYC, 2026-12-04).
ASR_CHUNK_S = env.float("ASR_CHUNK_S", default=0.6)
# A shorter re-decode cadence while no other decode of the worker runs (CPU to spare). With
# chunk decodes of 10 s context (ASR_CHUNK_CONTEXT_S) and agreement over 0.6 s of audio
# (ASR_AGREE_S): first delta 1.04 s after speech start at 1 session (2.46 s before issue 13) on
# the 2 vCPU host of those runs, 1.17 s on a slower one (chunk decodes 2x slower); docs/benchmarks.md.
ASR_CHUNK_MIN_S = env.float("ASR_CHUNK_MIN_S", default=0.2)
# Until an item shows its first word, ASR_CHUNK_MIN_S is its cadence whenever a chunk decode
# slot is free and no decode waits for one, though other decodes run. Against off (bench/asr,
# sixteen-item corpus, 2 vCPU, two runs, 2026-12-04): first delta 1.05 and 1.15 s (p95 1.49,
# 1.52) after speech start instead of 1.40 and 1.35 s (2.33, 2.44) at 4 sessions; WER 5.3 and
# 6.0 against 4.9 and 4.7 % there (the first words come from shorter audio, as at 1 session,
# where both are 6.4 %); words shown and commit→completed p50/p95 the same at 4 (56/551 and
# 74/641 against 84/591 and 201/567 ms) and at 16 (1.60/2.36 and 1.98/2.82 against 1.62/2.41
# and 1.89/2.68 s).
ASR_CHUNK_MIN_FIRST_WORDS = env.bool("ASR_CHUNK_MIN_FIRST_WORDS", default=True)
ASR_WINDOW_S = env.float("ASR_WINDOW_S", default=28.0)
# faster-whisper chunk decodes (not finals, not a pause decode that may stand in for one)
# encode the audio plus 2 s of padding, at least ASR_CHUNK_CONTEXT_S, instead of Whisper's
# padded 30 s (0 or 30: always 30 s). Issue 13: see bench/asr.py and docs/benchmarks.md for the numbers.
# 6 s / 10 s, side by side on four Piper readings of the bench corpus (1 session): WER 1.2/2.8,
# 1.2/1.2, 2.5/1.2 and 7.0/6.3 % (engine alone 1.2), first delta 0.56-0.81 s / 0.73-0.84 s, so
# no clear gain; 4 s: a decode of ~1 s of speech spelled "A L O W" for "Hello", WER 296 %. With
# any short context, some readings' first words come out wrong ("the like house") and are
# confirmed (ASR_CHUNK_CONTEXT_S=30: 1.2 %, first delta ~1.45 s at 1 session, ~4 s at 4).
ASR_CHUNK_CONTEXT_S = env.float("ASR_CHUNK_CONTEXT_S", default=10.0)
ASR_UNFIXED_WORDS = env.int("ASR_UNFIXED_WORDS", default=0)
ASR_UNFIXED_CHUNKS = env.int("ASR_UNFIXED_CHUNKS", default=2)
# A word is confirmed when a hypothesis of audio at least ASR_AGREE_S shorter agreed on it
# (0: the previous hypothesis, however close: at a 0.2 s cadence WER 10-22 % against the
# engine alone's 1.2 % on the bench corpus, words misheard mid-word confirmed; 0.4: 2.5 %).
ASR_AGREE_S = env.float("ASR_AGREE_S", default=0.6)
# Also confirmed: a word the previous hypothesis, however close, agrees on when the new one holds
# this many words after it (0: off); a word followed by another was heard whole, where the last
# one may be cut off. 1 against 0, side by side (bench/asr, 16 sessions a level, 2 vCPU): first
# delta 0.83 s after speech start instead of 1.20 at 1 session, 1.69 instead of 2.03 at 4; words
# shown by speech end 84 % instead of 78 % (1) and 61 instead of 58 % (4); WER 5.6 and 4.7 %
# both ways (2.8 against 2.0 % at 16); commit→completed unchanged (with the previous hypothesis
# also holding a word after it, as ASR_AGREE_FOLLOWED_BOTH_S=3600 still has it).
ASR_AGREE_FOLLOWED = env.int("ASR_AGREE_FOLLOWED", default=1)
# Until an item holds this many seconds of audio, the previous hypothesis must hold those words
# after the word too (ASR_AGREE_FOLLOWED's rule until 2026-12-04, 0: never; a large value:
# always). 2 against always, side by side on three Piper readings of the bench corpus (8
# sessions a level, 2 vCPU): words shown by speech end 94-95 % instead of 89 % at 1 session,
# 73-81 % instead of 74-79 % at 4; first delta unchanged at 1 (0.73-0.82 s), 1.38-1.53 against
# 1.38-1.62 s at 4; WER the same at 1 (1.2, 2.8, 7.0 %), 1.2/1.9/1.2 against 1.2/2.6/1.2 % at
# 4. 0 (never): first delta 0.44 s at 1 session, but one reading's WER 4.4 instead of 1.2 %,
# "the like house" confirmed from under a second of speech.
ASR_AGREE_FOLLOWED_BOTH_S = env.float("ASR_AGREE_FOLLOWED_BOTH_S", default=2.0)
# Issue 13: a commit whose audio after the last chunk decode is silence (below ASR_SILENCE_DBFS)
# completes with that decode instead of a second full decode; a chunk decode also starts once
# ASR_PAUSE_DECODE_S of silence follows speech the last decode did not cover (0: never).
ASR_FINAL_REUSE = env.bool("ASR_FINAL_REUSE", default=True)
ASR_SILENCE_DBFS = env.float("ASR_SILENCE_DBFS", default=-50.0)
ASR_PAUSE_DECODE_S = env.float("ASR_PAUSE_DECODE_S", default=0.2)
# That pause decode confirms every word of its hypothesis (no agreement needed), so they are
# sent as deltas before the commit, when it is a full-context decode (the one a final reuses).
# Off by default: a pause inside an item (between sentences) is not its end, and the decode
# of more audio can still change words before it (bench/asr.py, 4-item corpus: WER 2.6-8.2 %
# at 4 sessions against 1.2 % for the engine alone, equal without it).
ASR_PAUSE_CONFIRM = env.bool("ASR_PAUSE_CONFIRM", default=False)

# ASR_ENGINE=vllm: Whisper on vLLM (docs/specs/engines.md §3-4). Unset ASR_VLLM_MODEL: the
# bundled tiny.en, converted once into DATA_DIR/models (prepare_whisper_hf).
ASR_VLLM_MODEL = env("ASR_VLLM_MODEL", default="")
ASR_VLLM_DTYPE = env("ASR_VLLM_DTYPE", default="auto")
ASR_VLLM_MAX_NUM_SEQS = env.int("ASR_VLLM_MAX_NUM_SEQS", default=16)
ASR_VLLM_KV_CACHE_GIB = env.float("ASR_VLLM_KV_CACHE_GIB", default=1.0)
ASR_VLLM_MAX_MODEL_LEN = env.int("ASR_VLLM_MAX_MODEL_LEN", default=None)
ASR_VLLM_MAX_NUM_BATCHED_TOKENS = env.int(
    "ASR_VLLM_MAX_NUM_BATCHED_TOKENS", default=None
)
ASR_VLLM_ENFORCE_EAGER = env.bool("ASR_VLLM_ENFORCE_EAGER", default=True)
ASR_VLLM_PRIORITY = env.bool("ASR_VLLM_PRIORITY", default=True)
ASR_VLLM_ENGINE_ARGS = env.json("ASR_VLLM_ENGINE_ARGS", default={})
