"""Settings of the endpoints: keys on the sockets, the TTS socket and ``POST /v1/tts``, the
realtime socket, the OpenAI REST endpoints (docs/tts-protocol.md, docs/realtime-protocol.md,
docs/rest.md list what each limits).
"""

from __future__ import annotations

from veena_site.conf.registry import Group
from veena_site.conf.server import PRODUCTION

_sockets = Group(
    __name__,
    "Both sockets",
    "See [TTS protocol](tts-protocol.md) and [Realtime protocol](realtime-protocol.md).",
)
# ?api_key= ends up in proxy logs and browser history: off in production unless asked for.
ALLOW_QUERY_API_KEY = _sockets.env(
    "ALLOW_QUERY_API_KEY",
    bool,
    not PRODUCTION,
    "accept `?api_key=` (legacy clients; redacted in logs)",
    shown="`true`; `false` with `PRODUCTION=true`",
)
# Per-stream bounds (issue 9): control events.
WS_CONTROL_RATE = _sockets.constant(
    "WS_CONTROL_RATE",
    10.0,
    'control events per stream per second (see "Hostile input" in docs/operations.md)',
)
WS_CONTROL_BURST = _sockets.constant(
    "WS_CONTROL_BURST", 20, "control events per stream at once"
)

_tts = Group(
    __name__,
    "The TTS socket and `POST /v1/tts`",
    "See [TTS protocol](tts-protocol.md#limits-and-settings).",
)
TTS_AUTH_REQUIRED = _tts.env(
    "TTS_AUTH_REQUIRED", bool, True, "require a key on `/v1/tts/ws`"
)
TTS_MAX_TEXT_CHARS = _tts.env(
    "TTS_MAX_TEXT_CHARS",
    int,
    50_000,
    "request limit: characters of one request's text",
)
TTS_DRAIN_S = _tts.env(
    "TTS_DRAIN_S",
    float,
    30.0,
    "on shutdown, how long live TTS requests may finish before `INTERNAL_ERROR` / 1001",
)
TTS_SPEAKER_ALIASES = _tts.env(
    "TTS_SPEAKER_ALIASES",
    dict,
    {},
    'JSON alias overrides per engine, `{"<engine>": {"<alias>": "<voice id>"}}`, merged'
    " over the built-in table",
)
TTS_REQUEST_TIMEOUT_S = _tts.constant(
    "TTS_REQUEST_TIMEOUT_S", 30.0, "wait for the first request"
)
WS_IDLE_TIMEOUT_SECONDS = _tts.constant(
    "WS_IDLE_TIMEOUT_SECONDS",
    30.0,
    "keep-alive TTS stream idle limit between requests (accounts §12, tts K5)",
)
TTS_INPUT_IDLE_S = _tts.constant(
    "TTS_INPUT_IDLE_S",
    30.0,
    "incremental text input: idle limit of an incremental request",
)
TTS_MAX_BUFFER_DELAY_MS = _tts.constant(
    "TTS_MAX_BUFFER_DELAY_MS",
    3000,
    "incremental text input: longest wait for more text before buffered text is"
    " synthesised",
)
TTS_MAX_MESSAGE_BYTES = _tts.constant(
    "TTS_MAX_MESSAGE_BYTES",
    1024 * 1024,
    "request limit: bytes of one client message (1 MiB)",
)
TTS_SEGMENT_MIN_CHARS = _tts.constant(
    "TTS_SEGMENT_MIN_CHARS", 20, "sentence segmentation: shortest segment"
)
TTS_SEGMENT_MAX_CHARS = _tts.constant(
    "TTS_SEGMENT_MAX_CHARS", 200, "sentence segmentation: longest segment"
)
TTS_PROGRESS_EVERY = _tts.constant(
    "TTS_PROGRESS_EVERY",
    10,
    "streaming cadence: a `progress` event every this many frames",
)
TTS_WS_MAX_FRAME_MS = _tts.constant(
    "TTS_WS_MAX_FRAME_MS", 200, "streaming cadence: longest audio frame"
)
TTS_CHUNK_WINDOW = _tts.constant(
    "TTS_CHUNK_WINDOW",
    32,
    "flow control: unacknowledged chunks a worker may have in flight before it pauses"
    " its engine",
)
TTS_SEND_BUFFER_BYTES = _tts.constant(
    "TTS_SEND_BUFFER_BYTES",
    256 * 1024,
    "worker audio is acknowledged only while less than this waits unsent in the socket"
    " (256 KiB)",
)
TTS_CLIENT_STALL_S = _tts.constant(
    "TTS_CLIENT_STALL_S", 5.0, "a client that takes no audio for this long is closed"
)
TTS_ADMISSION_WAIT_MS = _tts.constant(
    "TTS_ADMISSION_WAIT_MS",
    1000,
    "worker admission: how long busy answers are retried",
)
TTS_WORKER_ANSWER_MS = _tts.constant(
    "TTS_WORKER_ANSWER_MS",
    500,
    "worker admission: how long a worker may take to answer",
)
TTS_OVERLOAD_RETRY_MS = _tts.constant(
    "TTS_OVERLOAD_RETRY_MS",
    1000,
    "`retry_after_ms` of `STREAMING_OVERLOADED` (and `Retry-After` of its 503)",
)
TTS_WORKER_STALL_S = _tts.constant(
    "TTS_WORKER_STALL_S",
    3.0,
    "loss detection: heartbeat silence after which the worker is lost",
)
TTS_CANCEL_DEADLINE_MS = _tts.constant(
    "TTS_CANCEL_DEADLINE_MS",
    200,
    "cancel bound the vLLM engine's tests hold it to (no code enforces it at run time;"
    " it was an environment variable that nothing read)",
)
TTS_REST_TIMEOUT_S = _tts.constant(
    "TTS_REST_TIMEOUT_S", 300.0, "`POST /v1/tts` deadline"
)

_asr = Group(
    __name__,
    "The realtime ASR socket",
    "See [Realtime protocol](realtime-protocol.md#limits-and-settings).",
)
ASR_MODEL = _asr.env("ASR_MODEL", str, "whisper-tiny.en", "served model name")
ASR_MODEL_ALIASES = _asr.env(
    "ASR_MODEL_ALIASES",
    list,
    [
        "whisper-1",
        "gpt-4o-transcribe",
        "gpt-4o-mini-transcribe",
        "gpt-realtime-whisper",
    ],
    "OpenAI model names accepted for `ASR_MODEL`",
)
ASR_DEFAULT_TURN_DETECTION = _asr.env(
    "ASR_DEFAULT_TURN_DETECTION",
    dict,
    None,
    "initial turn detection (JSON); unset: none (manual commits)",
)
ASR_MAX_SESSION_S = _asr.env(
    "ASR_MAX_SESSION_S", int, 1800, "realtime session lifetime limit"
)
ASR_DIALECT = _asr.constant(
    "ASR_DIALECT",
    "auto",
    "realtime dialect when `?dialect=` is absent (`auto`, `openai`, `vllm`)",
)
ASR_TRIM_NONSPEECH = _asr.constant(
    "ASR_TRIM_NONSPEECH", True, "skip speechless items (still metered)"
)
ASR_PRECOMMIT_DELTAS = _asr.constant(
    "ASR_PRECOMMIT_DELTAS",
    True,
    "stream confirmed words before commit (`bench/asr.py` mode `no deltas`)",
)
ASR_MAX_MESSAGE_BYTES = _asr.constant(
    "ASR_MAX_MESSAGE_BYTES",
    16 * 1024 * 1024,
    "realtime message cap (Daphne is configured to carry it)",
)
ASR_IDLE_TIMEOUT_S = _asr.constant(
    "ASR_IDLE_TIMEOUT_S", 300.0, "realtime idle limit (0: never)"
)
ASR_MAX_BUFFER_S = _asr.constant("ASR_MAX_BUFFER_S", 60, "per-item audio cap")
ASR_MIN_COMMIT_MS = _asr.constant("ASR_MIN_COMMIT_MS", 100, "minimum commit")
ASR_MAX_EARLY_BYTES = _asr.constant(
    "ASR_MAX_EARLY_BYTES",
    4 * 1024 * 1024,
    "realtime messages held while the session is being admitted",
)
ASR_MAX_PENDING_S = _asr.constant(
    "ASR_MAX_PENDING_S", 300, "realtime audio of all items not transcribed yet"
)
ASR_MAX_PROMPT_CHARS = _asr.constant(
    "ASR_MAX_PROMPT_CHARS", 2000, "length of the realtime transcription `prompt`"
)
ASR_WORKER_ANSWER_MS = _asr.constant(
    "ASR_WORKER_ANSWER_MS",
    500,
    "worker admission: how long a worker may take to answer",
)
ASR_ADMISSION_WAIT_MS = _asr.constant(
    "ASR_ADMISSION_WAIT_MS",
    1000,
    "worker admission: how long busy answers are retried",
)
ASR_WORKER_STALL_S = _asr.constant(
    "ASR_WORKER_STALL_S",
    3.0,
    "loss detection: heartbeat silence after which the worker is lost (the session"
    " fails over)",
)

# OpenAI-compatible REST (openai_rest): model aliases of the TTS engine, OpenAI voice names
# mapped to our speakers (unmapped ones speak with the default speaker), and the caps.
_openai = Group(__name__, "OpenAI REST", "See [REST](rest.md).")
OPENAI_TTS_MODEL_ALIASES = _openai.env(
    "OPENAI_TTS_MODEL_ALIASES",
    list,
    ["tts-1", "tts-1-hd", "gpt-4o-mini-tts"],
    "model names `POST /v1/audio/speech` accepts besides the engine's",
)
OPENAI_TTS_VOICES = _openai.env(
    "OPENAI_TTS_VOICES",
    dict,
    {},
    "JSON: OpenAI voice name → our speaker (unmapped OpenAI names use the default"
    " speaker)",
)
OPENAI_TRANSCRIBE_MAX_BYTES = _openai.env(
    "OPENAI_TRANSCRIBE_MAX_BYTES",
    int,
    25 * 1024 * 1024,
    "largest upload (25 MiB; 413 `file_too_large`)",
)
OPENAI_TRANSCRIBE_MAX_SECONDS = _openai.env(
    "OPENAI_TRANSCRIBE_MAX_SECONDS",
    float,
    1500.0,
    "longest audio of a transcription (400 `audio_too_long`)",
)
OPENAI_SPEECH_MAX_INPUT_CHARS = _openai.constant(
    "OPENAI_SPEECH_MAX_INPUT_CHARS", 4096, "longest `input` of a speech call"
)
OPENAI_TRANSCRIBE_TIMEOUT_S = _openai.constant(
    "OPENAI_TRANSCRIBE_TIMEOUT_S", 600.0, "time limit of one transcription job (504)"
)
