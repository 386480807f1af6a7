"""How the CPU engines decode: Piper's ONNX runs and streaming ASR. Tuning constants only.

Each was measured by a benchmark (``make bench``, docs/benchmarks.md), which varies them
through ``bench/support/settings.py``; no deployment sets them. Read by ``tts.worker.engines``
(Piper) and ``asr.worker.jobs``.
"""

from __future__ import annotations

from veena_site.conf.backbone import REDIS_URL
from veena_site.conf.registry import Group

_piper = Group(
    __name__,
    "Decoding: Piper",
    "Measured on 2 vCPUs, 2026-12-05 (`bench/tts.py`).",
)
TTS_PIPER_SESSION_THREADS: list[int] = _piper.constant(
    "TTS_PIPER_SESSION_THREADS",
    [],
    "empty: `ENGINE_THREADS` and 1. Piper's ONNX sessions by intra-op thread count; each"
    " sentence runs on the widest session within its share of the `ENGINE_THREADS`"
    " cores (all of them for a lone stream, one each when there are as many streams as"
    " cores); a one-thread session is always there; `[1]` is one thread per stream"
    " (before issue 13). The sessions run on one copy of the model's `Conv` filters (57"
    " of its 60 MiB, read from the ONNX file and handed to each session with"
    " `SessionOptions.add_initializer`): a second session costs ~18 MiB of RSS instead"
    " of ~75",
)
TTS_PIPER_SPINNING = _piper.constant(
    "TTS_PIPER_SPINNING",
    not REDIS_URL,
    "a wide session's ONNX intra-op threads spin between the ops of a run and stop when"
    " it ends (`session.force_spinning_stop`), so they never take the core of a run that"
    " starts beside them. Off, a run took 1.06-1.07× as long (the same sentences on one"
    " session, in one process); before, spinning on without the stop cost 2 clients"
    " 12-18 %. Off in the distributed topology, where a worker may share its host with"
    " other workers and gateways: there `tests/e2e/test_scaleout.py` failed once in CI"
    " and 1 of 8 runs here with it on (a TTS slot still busy 5 s after its client left),"
    " 0 of 4 off",
    shown="`true`; `false` with `REDIS_URL`",
)
TTS_PIPER_WAIT_FOR_CORES = _piper.constant(
    "TTS_PIPER_WAIT_FOR_CORES",
    True,
    "a run waits for cores a wide run holds (never more threads than cores); false: a"
    " one-thread run starts beside it, up to one sentence of overlap",
)
TTS_PIPER_SHARE_HOLD_S = _piper.constant(
    "TTS_PIPER_SHARE_HOLD_S",
    1.0,
    "a run's share of the cores counts the most streams of the last this many seconds,"
    " so streams that take turns do not grab every core between each other's requests",
)
TTS_PIPER_RETURN_MEMORY = _piper.constant(
    "TTS_PIPER_RETURN_MEMORY",
    True,
    "once no stream has been in the engine for `TTS_PIPER_RELEASE_IDLE_S`, every ONNX"
    " session runs one short sentence with the arena shrink option and glibc"
    " `malloc_trim` returns the freed pages: a TTS-only process falls back to 260-290"
    " MiB after a burst at 1-16 clients (Piper alone, its voice still loaded, plus Django"
    " alone: 370-2400 MiB) instead of staying at its high-water mark (~480 MiB after one"
    " stream, ~830 after two); asked on every run instead it cost 10-20 % RTF. The next"
    " stream faults the memory in again: +20-40 ms first audio for a lone stream",
)
TTS_PIPER_RELEASE_IDLE_S = _piper.constant(
    "TTS_PIPER_RELEASE_IDLE_S",
    10.0,
    "idle seconds after which `TTS_PIPER_RETURN_MEMORY` returns the memory (it was 1 s;"
    " this waits out a conversation's pauses)",
)
TTS_PIPER_FIRST_CLAUSE_PHONEMES = _piper.constant(
    "TTS_PIPER_FIRST_CLAUSE_PHONEMES",
    0,
    "greater than 0: a request's first sentence is cut after a clause mark (`,` `;` `:`)"
    " that leaves at least this many phonemes on both sides, so its first audio waits"
    " for a clause (20: a lone stream's first audio 0.84-0.92× Piper alone against"
    " 1.10-1.12× whole, round-trip WER 3.3 % against 3.5 % over 26 texts × 10 Piper"
    " readings through Whisper tiny.en, audio length 1.003×). Off: the first clause ends"
    " with a sentence's fall (Whisper writes \"o'clock. Or maybe\" for \"o'clock, or"
    ' maybe"), and streaming Whisper on vLLM misread the 40 s test item spoken that way'
    " (WER 0.28 and 0.53 against 0.000)",
)
TTS_PIPER_FIRST_PIECE_FRAMES = _piper.constant(
    "TTS_PIPER_FIRST_PIECE_FRAMES",
    32,
    "greater than 0: Piper's model runs as two ONNX sessions, encoder (text encoder,"
    " durations, flow) and HiFi-GAN decoder, split at load with the `onnx` package at the"
    " decoder's input (once per model file, by a child process, into"
    " `DATA_DIR/piper-split/`), and a request's first sentence is decoded in two pieces,"
    " the first this many latent frames (~12 ms of audio each; keep it above"
    " `TTS_WS_MAX_FRAME_MS`, since a lone frame waits for the next). Each piece is decoded"
    " with 10 frames of context either side, so the samples are the whole decode's"
    " within 2.2e-6 (19 sentences, 4 cut points each) and the prosody is the whole"
    " sentence's (tts/worker/engines/piper_split.py). A lone stream's first audio 0.56× Piper"
    " alone (1.06-1.09× whole); the split sentence's run +6 %; the two sessions take what"
    " the whole model's took (943 against 954 ms for 8 sentences). 0: the model runs"
    " whole",
)
TTS_PIPER_SIDE_BY_SIDE = _piper.constant(
    "TTS_PIPER_SIDE_BY_SIDE",
    True,
    "while a stream is alone, its runs after the first audio's go side by side on one"
    " thread each, as many as cores, each started as soon as a lane is free (two"
    " one-thread runs do 1.17× the work of one two-thread run on 2 vCPUs); a run with"
    " none beside it runs on every core once its audio is asked for. 1 client, with the"
    " first piece: total 1.01-1.06× Piper alone for ~150-character texts, 1.09× for a"
    " ~1000-character text. False: one run at a time at the stream's share",
)

# The WERs quoted are of bench/asr.py's first corpus, four items (69 words, a misheard word
# 1.4 points) unless they say otherwise; docs/benchmarks.md has the sixteen-item corpus'
# (defaults 6.4 %, engine alone 2.6 %).
_asr = Group(
    __name__,
    "Decoding: streaming ASR",
    "How a streaming ASR job decodes (`asr.worker.jobs`); measured with `bench/asr.py` on 2"
    " vCPUs, 2026-12-04.",
)
ASR_CHUNK_S = _asr.constant(
    "ASR_CHUNK_S",
    0.6,
    "streaming re-decode cadence while other decodes run. 0.6 s (`ASR_AGREE_S`, so each"
    " hypothesis can confirm the previous one's words) showed the first delta at 4"
    " sessions 1.91 s after speech start instead of 2.48-2.51 s at 1.0 s, words shown by"
    " speech end 68 % instead of 44-54 %, WER unchanged; 0.4 s worse at 4 (1.9 % WER,"
    " 2.22 s: the decodes crowd each other)",
)
ASR_CHUNK_MIN_S = _asr.constant(
    "ASR_CHUNK_MIN_S",
    0.2,
    "re-decode cadence while no other decode of the worker runs or waits (CPU to"
    " spare); at most `ASR_CHUNK_S`; audio that is all silence since the last decode is"
    " never decoded. With 10 s chunk context and agreement over 0.6 s: first delta 1.04 s"
    " after speech start at 1 session (2.46 s before issue 13)",
)
ASR_CHUNK_MIN_FIRST_WORDS = _asr.constant(
    "ASR_CHUNK_MIN_FIRST_WORDS",
    True,
    "until an item shows its first word, `ASR_CHUNK_MIN_S` is its cadence whenever a"
    " chunk decode slot is free and no decode waits, though other decodes run. Against"
    " false (sixteen-item corpus, two runs): first delta 1.05 and 1.15 s (p95 1.49,"
    " 1.52) after speech start instead of 1.40 and 1.35 s (2.33, 2.44) at 4 sessions; WER"
    " 5.3 and 6.0 against 4.9 and 4.7 % there (the first words are confirmed from shorter"
    " audio, as at 1 session, where both give 6.4 %); words shown and commit→completed"
    " the same at 4 and 16",
)
ASR_WINDOW_S = _asr.constant("ASR_WINDOW_S", 28.0, "streaming decode window")
ASR_CHUNK_CONTEXT_S = _asr.constant(
    "ASR_CHUNK_CONTEXT_S",
    10.0,
    "faster-whisper chunk decodes encode their audio plus 2 s of padding, at least this"
    " many seconds, instead of Whisper's padded 30 s (the encoder was ~195 of a ~265 ms"
    " chunk decode); 0 or 30: chunk decodes too. 6 s against 10 s: no clear gain; 4 s: a"
    ' decode of ~1 s of speech spelled "A L O W" for "Hello". Every decode\'s new tokens,'
    " chunk or final, on either engine, are capped at 10 + 8 a second of audio and at"
    " what the prompt leaves of Whisper's 448. Finals, and a pause decode that may stand"
    " in for one, always encode 30 s, so transcripts are those of a full decode",
)
ASR_UNFIXED_WORDS = _asr.constant(
    "ASR_UNFIXED_WORDS",
    0,
    "words held back (0: local agreement alone, a word is confirmed once an earlier"
    " hypothesis agrees on it, see `ASR_AGREE_S`)",
)
ASR_UNFIXED_CHUNKS = _asr.constant(
    "ASR_UNFIXED_CHUNKS", 2, "streaming decode parameter"
)
ASR_AGREE_S = _asr.constant(
    "ASR_AGREE_S",
    0.6,
    "a word is confirmed when the latest hypothesis of audio at least this much shorter"
    " agrees on it (0: the previous hypothesis, however close: at a 0.2 s cadence both"
    ' end inside the word being spoken and agree on a guess such as "is" for "His", WER'
    " 10-22 % against the engine alone's 1.2 %; 0.4: 2.5 %)",
)
ASR_AGREE_FOLLOWED = _asr.constant(
    "ASR_AGREE_FOLLOWED",
    1,
    "a word is also confirmed when the previous hypothesis, however close, agrees on it"
    " and the new one holds at least this many words after it (a word followed by"
    " another was heard whole); 0: agreement over `ASR_AGREE_S` alone. Against 0: first"
    " delta 0.83 s after speech start instead of 1.20 s at 1 session and 1.69 instead of"
    " 2.03 s at 4, same WER at 1 and 4 sessions (2.8 against 2.0 % at 16)",
)
ASR_AGREE_FOLLOWED_BOTH_S = _asr.constant(
    "ASR_AGREE_FOLLOWED_BOTH_S",
    2.0,
    "until an item holds this many seconds of audio, the previous hypothesis must hold"
    " those words after the word too (the first second or two of short-context decodes"
    " mishear most), for items whose deltas are the transcript (`transcript: deltas`); a"
    " `final` item's preview never waits for this (its transcript replaces the preview:"
    " first delta 0.98 s instead of 1.18 s at 4 sessions and 0.71 instead of 0.79 s at"
    " 1, preview WER 6.6 against 6.0 % and 9.8 against 8.5 %, 2026-12-06); 3600: always,"
    " 0: never. Against always, on three Piper readings of"
    " the corpus: words shown by speech end 94-95 % instead of 89 % at 1 session, first"
    " delta and WER unchanged at 1, WER 1.2/1.9/1.2 against 1.2/2.6/1.2 % at 4. 0 showed"
    ' the first word at 0.44 s but confirmed "the like house" on one reading (WER 4.4'
    " instead of 1.2 %)",
)
ASR_FINAL_REUSE = _asr.constant(
    "ASR_FINAL_REUSE",
    True,
    "a commit whose audio after the last finished chunk decode is silence (below"
    " `ASR_SILENCE_DBFS`) completes from that decode (same transcript, no second full"
    " decode); otherwise the full final decode runs",
)
ASR_SILENCE_DBFS = _asr.constant(
    "ASR_SILENCE_DBFS",
    -50.0,
    "20 ms frames quieter than this (RMS) count as silence for `ASR_FINAL_REUSE` and"
    " pause decodes",
)
ASR_PAUSE_DECODE_S = _asr.constant(
    "ASR_PAUSE_DECODE_S",
    0.2,
    "a chunk decode also starts once this much silence follows speech the last decode"
    " did not cover, so a server-VAD commit (after `silence_duration_ms`) usually finds"
    " it done; it runs at final priority while no final decode runs or waits, and a"
    " commit then waits for it instead of cancelling it; 0: only every `ASR_CHUNK_S`",
)
ASR_PAUSE_CONFIRM = _asr.constant(
    "ASR_PAUSE_CONFIRM",
    False,
    "that pause decode, when it is a full-context one (the decode the final then"
    " reuses), confirms every word of its hypothesis at once, so they are sent as deltas"
    " before the commit. Off: a pause between sentences is not the item's end, and the"
    " decode of more audio can still change the words before it (4 sessions: WER"
    " 2.6-8.2 % with it, equal to the engine alone's 1.2 % without)",
)
