"""``/v1/tts/ws`` and ``POST /v1/tts`` end to end on TTS_ENGINE=vllm with the tiny checkpoint.

Socket → consumer → channel layer → worker → vLLM (a spawned engine core) → frame parser →
shared SNAC decoder → resampler → socket. The engine is the session's (``vllm_tts``), handed to
each test's worker runtime; these tests run in the session event loop that AsyncLLM serves.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from django.conf import settings as django_settings

from tests.conftest import running_worker
from tests.tts.conftest import LoadedVllm, Opener, Stream, stream_opener
from tests.tts.test_rest import post
from tts.orpheus.snac_tokens import FRAME_TOKENS
from tts.orpheus.vllm_config import SEGMENT_PAUSE_MS, VllmTtsConfig
from tts.worker.engines import ENGINES
from tts.worker.engines.snac_window import SAMPLES_PER_FRAME
from tts.worker.engines.vllm import VllmSnacTts
from veena_site.runtime import WorkerRuntime

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.django_db(transaction=True),
]

RATES = (8000, 16000, 22050, 24000, 44100, 48000)
CASES = [("wav", r) for r in RATES] + [("pcm", r) for r in RATES] + [("mulaw", 8000)]
NATIVE = 24_000
LONG = (
    "The quick brown fox jumps over the lazy dog near the river bank. "
    "A journey of a thousand miles begins with a single step forward. "
    "Please call me back when you have a moment to talk about it. "
    "Every morning the market opens early and the vendors set out bread."
)


class SharedEngine:
    """The session's engine inside one test's worker: the runtime's close() leaves it up."""

    def __init__(self, engine: VllmSnacTts) -> None:
        self._engine = engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def close(self) -> None:
        """The session fixture closes the engine."""


@pytest_asyncio.fixture(loop_scope="session")
async def vllm_worker(
    vllm_tts: LoadedVllm, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[WorkerRuntime]:
    for name, value in vllm_tts.settings.items():
        setattr(settings, name, value)
    settings.WORKER_KINDS = ["tts"]
    settings.TTS_WORKER_SLOTS = 8
    monkeypatch.setitem(ENGINES, "vllm", lambda: SharedEngine(vllm_tts.engine))
    async with running_worker() as runtime:
        assert runtime.status().ready["tts"]
        yield runtime


@pytest_asyncio.fixture(loop_scope="session")
async def streams(api_key: str, vllm_worker: WorkerRuntime) -> AsyncIterator[Opener]:
    async with stream_opener(api_key) as opener:
        yield opener


def samples_of(stream: Stream, fmt: str) -> int:
    return len(stream.log.audio(fmt)) // (1 if fmt == "mulaw" else 2)


def frames_implied(metrics: dict[str, Any]) -> int:
    """Complete frames in one segment's ids: a stop id ends them unless it was truncated."""
    assert metrics["segments"] == 1
    return (metrics["tokens"] - (not metrics["truncated"])) // FRAME_TOKENS


@pytest.mark.parametrize(("fmt", "rate"), CASES)
async def test_tts_au1_au4_au7_every_format_and_rate_from_the_token_stream(
    streams: Opener, fmt: str, rate: int
) -> None:
    stream = await streams()
    await stream.send(
        {"text": "Hello world.", "speaker": "kavya", "format": fmt, "sample_rate": rate}
        | {"seed": 21}
    )
    metrics = (await stream.event("complete", timeout=120))["metrics"]
    header = stream.log.named("header")[0]
    assert (header["sample_rate"], header["format"]) == (rate, fmt)
    assert (header["engine"], header["speaker"]) == ("vllm-snac", "kavya")
    assert header["model_version"] == "vllm-snac/llama"
    frames = metrics["snac_frames"]
    assert frames >= 1 and frames == frames_implied(metrics)
    assert (metrics["frames_dropped"], metrics["tokens_ignored"]) == (0, 0)
    samples = samples_of(stream, fmt)
    assert abs(samples - round(frames * SAMPLES_PER_FRAME * rate / NATIVE)) <= 1
    assert metrics["total_bytes"] == sum(map(len, stream.log.frames))
    assert metrics["chunks_sent"] == len(stream.log.frames)
    assert metrics["audio_duration_seconds"] == round(samples / rate, 2)
    width = 1 if fmt == "mulaw" else 2
    audio_frames = stream.log.frames[1:] if fmt == "wav" else stream.log.frames
    assert all(
        0 < len(f) <= rate // 5 * width and len(f) % width == 0 for f in audio_frames
    )
    if fmt == "wav":
        assert len(stream.log.frames[0]) == 44
    assert await stream.closed() == 1000


async def test_tts_t6_au9_long_text_is_segmented_and_every_frame_is_heard(
    streams: Opener,
) -> None:
    stream = await streams()
    await stream.send(
        {"text": LONG, "format": "pcm", "sample_rate": NATIVE, "seed": 2}
        | {"max_tokens": 75}  # per segment: keeps the test short
    )
    metrics = (await stream.event("complete", timeout=240))["metrics"]
    segments = metrics["segments"]
    assert segments >= 2 and metrics["frames_dropped"] == 0
    pause = NATIVE * SEGMENT_PAUSE_MS // 1000
    expected = metrics["snac_frames"] * SAMPLES_PER_FRAME + pause * (segments - 1)
    assert samples_of(stream, "pcm") == expected


async def cancelled_mid_stream(stream: Stream, engine: Any, how: str) -> str:
    """Start a long request, stop it after its first audio; the vLLM request aborted."""
    before = set(engine.log.aborted)
    await stream.send({"text": LONG, "format": "pcm", "max_tokens": 4096})
    await stream.until(lambda item: item[0] == "bytes", 120)
    if how == "cancel":
        await stream.send({"event": "cancel"})
        metrics = (await stream.event("complete"))["metrics"]
        assert metrics["cancelled"] is True
    else:
        await stream.comm.disconnect()
    for _ in range(500):
        if set(engine.log.aborted) - before:
            break
        await asyncio.sleep(0.01)
    (request_id,) = set(engine.log.aborted) - before
    return request_id


@pytest.mark.parametrize("how", ["cancel", "disconnect"])
async def test_tts_z2_cancel_and_disconnect_abort_the_vllm_request(
    streams: Opener, vllm_worker: WorkerRuntime, vllm_tts: LoadedVllm, how: str
) -> None:
    engine = vllm_tts.engine
    request_id = await cancelled_mid_stream(await streams(), engine, how)
    assert engine.log.aborted[request_id] <= django_settings.TTS_CANCEL_DEADLINE_MS
    assert engine.llm.get_num_unfinished_requests() == 0
    for _ in range(500):
        if not vllm_worker.jobs.busy("tts"):
            break
        await asyncio.sleep(0.01)
    assert vllm_worker.jobs.busy("tts") == 0


async def test_tts_h3_rest_audio_equals_a_seeded_websocket_request(
    streams: Opener, api_key: str
) -> None:
    request = {"text": "Hello there.", "format": "pcm", "sample_rate": 16000, "seed": 8}
    stream = await streams()
    await stream.send(request)
    await stream.event("complete", timeout=120)
    response = await post(request, api_key)
    assert response.status_code == 200
    assert response.content == stream.log.audio("pcm")


async def test_tts_worker_is_not_ready_when_snac_cannot_load(
    vllm_tts: LoadedVllm, settings: Any
) -> None:
    """Readiness needs both models: without SNAC weights (and no random init) no engine."""
    for name, value in vllm_tts.settings.items():
        setattr(settings, name, value)
    settings.WORKER_KINDS = ["tts"]
    settings.TTS_SNAC_RANDOM_INIT = False
    async with running_worker() as runtime:
        assert runtime.engines["tts"].failed
        assert runtime.status().ready == {"tts": False}


async def test_tts_s1_engine_refuses_voices_the_checkpoint_lacks(
    vllm_tts: LoadedVllm,
) -> None:
    config = replace(vllm_tts.engine.config, voices=("kavya", "nobody"))
    assert isinstance(config, VllmTtsConfig)
    with pytest.raises(ValueError, match="no voice token for nobody"):
        VllmSnacTts.load(config)


@pytest.mark.parametrize(
    ("field", "value", "setting"),
    [
        ("model", "", "TTS_VLLM_MODEL"),
        (
            "model",
            "canopylabs/orpheus-3b-0.1-ft",
            "TTS_VLLM_MODEL",
        ),  # a hub id: no download
        ("snac", "hubertsiuzdak/snac_24khz", "TTS_SNAC_MODEL"),
    ],
)
async def test_tts_engine_loads_only_local_model_directories(
    vllm_tts: LoadedVllm, field: str, value: str, setting: str
) -> None:
    config = replace(vllm_tts.engine.config, **{field: Path(value)})
    with pytest.raises(FileNotFoundError, match=f"{setting} must name a local"):
        VllmSnacTts.load(config)
