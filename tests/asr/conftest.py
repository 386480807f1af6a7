"""Fixtures for the realtime ASR tests: Piper speech clips and a validating client.

Every frame a ``Realtime`` client receives is checked (realtime T-V1 to T-V3): OpenAI-dialect
frames with ``TypeAdapter(RealtimeServerEvent)`` of the pinned openai-python (``format.rate``
16000/48000 validated as 24000), beta clients' frames with the beta union (``client_secret``
exempted), vLLM frames by their exact key sets; no frame may contain an API key or a marker.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import soxr
from channels.testing import WebsocketCommunicator
from openai.types.beta.realtime import RealtimeServerEvent as BetaServerEvent
from openai.types.realtime import RealtimeServerEvent
from pydantic import TypeAdapter

from gateway.pcm import lin2alaw, lin2ulaw

GA_EVENTS = TypeAdapter(RealtimeServerEvent)
BETA_EVENTS = TypeAdapter(BetaServerEvent)
GA_ONLY = ("session.created", "session.updated", "conversation.item.added")
VLLM_KEYS = {
    "session.updated": {"type", "model"},
    "transcription.delta": {"type", "delta", "logprobs"},
    "transcription.done": {"type", "text", "usage"},
    "error": {"type", "error", "code"},
}
MARKER = "SECRET-MARKER-7f3a"

CLIP_TEXT = "Hello world. This is a test of the speech gateway."
CLIP2_TEXT = "The quick brown fox jumps over the lazy dog."
NUMBERS_TEXT = "Call me at 5 o'clock, or maybe at 7; thanks!"


@dataclass(frozen=True)
class Clip:
    """A Piper clip at 16 kHz int16, with its text."""

    text: str
    pcm16k: np.ndarray

    def at(self, rate: int) -> np.ndarray:
        """The clip resampled to ``rate`` as int16."""
        if rate == 16000:
            return self.pcm16k
        x = soxr.resample(self.pcm16k.astype(np.float32), 16000, rate)
        return np.clip(np.rint(x), -32768, 32767).astype(np.int16)

    def bytes_at(self, rate: int) -> bytes:
        """PCM16 little-endian bytes at ``rate``."""
        return self.at(rate).astype("<i2").tobytes()

    def g711(self, kind: str) -> bytes:
        """G.711 µ-law or A-law bytes at 8 kHz."""
        x = self.at(8000)
        return lin2ulaw(x) if kind == "audio/pcmu" else lin2alaw(x)

    @property
    def seconds(self) -> float:
        """Duration."""
        return len(self.pcm16k) / 16000


def synthesize(texts: list[str]) -> list[Clip]:
    """Speak ``texts`` with the real Piper voice, at 16 kHz int16."""
    from tts.worker.engines.base import TtsEngineRequest
    from tts.worker.engines.piper import PiperTts

    async def run() -> list[Clip]:
        engine = PiperTts.load(threads=1)
        try:
            clips = []
            for text in texts:
                req = TtsEngineRequest(text=text, voice=engine.default_voice)
                chunks = [c async for c in engine.stream(req)]
                audio = soxr.resample(np.concatenate(chunks), engine.native_rate, 16000)
                pcm = np.clip(np.rint(audio * 32767), -32768, 32767).astype(np.int16)
                clips.append(Clip(text, pcm))
            return clips
        finally:
            engine.close()

    return asyncio.run(run())


@pytest.fixture(scope="session")
def clips() -> dict[str, Clip]:
    """Piper speech made once per test session (realtime §17 fixtures)."""
    made = synthesize([CLIP_TEXT, CLIP2_TEXT, NUMBERS_TEXT])
    return dict(zip(("clip", "clip2", "numbers"), made, strict=True))


def silence(seconds: float, rate: int = 24000) -> bytes:
    """Digital silence as PCM16 bytes."""
    return bytes(2 * int(seconds * rate))


def b64(data: bytes) -> str:
    """Base64 text of ``data``."""
    return base64.b64encode(data).decode()


def sdk_view(event: dict[str, Any]) -> dict[str, Any]:
    """T-V1/T-V2 permitted deviations replaced, independently of asr.protocol."""
    view = copy.deepcopy(event)
    session = view.get("session")
    if isinstance(session, dict):
        fmt = (session.get("audio") or {}).get("input", {}).get("format") or {}
        if fmt.get("rate") in (16000, 48000):
            fmt["rate"] = 24000
        if view["type"] == "transcription_session.updated":
            assert "client_secret" not in session
            session["client_secret"] = {"value": "x", "expires_at": 0}
            model = (session.get("input_audio_transcription") or {}).get("model")
            if model not in (
                None,
                "whisper-1",
                "gpt-4o-transcribe",
                "gpt-4o-mini-transcribe",
            ):
                session["input_audio_transcription"]["model"] = "whisper-1"
    return view


@dataclass
class Realtime:
    """A WebsocketCommunicator that validates every frame it receives."""

    comm: WebsocketCommunicator
    secrets: tuple[str, ...] = ()
    beta: bool = False
    vllm: bool = False
    frames: list[dict[str, Any]] = field(default_factory=list)
    close: dict[str, Any] | None = None

    async def send(self, event: dict[str, Any] | str) -> None:
        """Send one text frame (a dict is JSON-encoded)."""
        text = event if isinstance(event, str) else json.dumps(event)
        await self.comm.send_to(text_data=text)

    async def append(self, pcm: bytes, chunk_bytes: int = 9600, **extra: Any) -> None:
        """Append ``pcm`` in pieces of ``chunk_bytes``."""
        for i in range(0, len(pcm), chunk_bytes):
            piece = pcm[i : i + chunk_bytes]
            await self.send(
                {"type": "input_audio_buffer.append", "audio": b64(piece), **extra}
            )

    async def recv(self, timeout: float = 10) -> dict[str, Any]:
        """The next event; fails on a close."""
        out = await self.comm.receive_output(timeout=timeout)
        if out["type"] == "websocket.close":
            self.close = out
            raise AssertionError(f"closed: {out}")
        assert out.get("text") is not None, out
        event = self.check(out["text"])
        self.frames.append(event)
        return event

    async def until(self, kind: str, timeout: float = 10) -> list[dict[str, Any]]:
        """Events up to and including the first of type ``kind``."""
        got = []
        while True:
            event = await self.recv(timeout)
            got.append(event)
            if event["type"] == kind:
                return got

    async def closed(self, timeout: float = 10) -> tuple[list[dict[str, Any]], dict]:
        """Events until the server closes; returns them and the close message."""
        got: list[dict[str, Any]] = []
        while True:
            out = await self.comm.receive_output(timeout=timeout)
            if out["type"] == "websocket.close":
                self.close = out
                return got, out
            event = self.check(out["text"])
            self.frames.append(event)
            got.append(event)

    async def quiet(self, timeout: float = 0.3) -> bool:
        """True when nothing arrives within ``timeout``."""
        return await self.comm.receive_nothing(timeout=timeout)

    def check(self, text: str) -> dict[str, Any]:
        """T-V1 to T-V3 on one frame."""
        for secret in (*self.secrets, MARKER):
            assert secret not in text, "a secret leaked into a frame"
        event = json.loads(text)
        kind = event["type"]
        if self.vllm and kind != "session.created":
            assert set(event) == VLLM_KEYS[kind], event
            if kind == "transcription.delta":
                assert event["delta"]
            return event
        if self.beta and kind not in GA_ONLY:
            BETA_EVENTS.validate_python(sdk_view(event))
        else:
            GA_EVENTS.validate_python(sdk_view(event))
        return event


def update(**input_: Any) -> dict[str, Any]:
    """An OpenAI-dialect ``session.update`` setting ``session.audio.input`` fields."""
    return {
        "type": "session.update",
        "session": {"type": "transcription", "audio": {"input": input_}},
    }


def bearer(raw: str) -> list[tuple[bytes, bytes]]:
    """An Authorization header."""
    return [(b"authorization", b"Bearer " + raw.encode())]


async def connect(
    path: str = "/v1/realtime",
    *,
    key: str | None = None,
    headers: list[tuple[bytes, bytes]] | None = None,
    subprotocols: list[str] | None = None,
    beta: bool = False,
    vllm: bool = False,
    created: bool = True,
) -> Realtime:
    """Open a realtime socket on the ASGI app; by default wait for session.created."""
    from veena_site.asgi import application

    all_headers = list(headers or [])
    if key is not None:
        all_headers += bearer(key)
    comm = WebsocketCommunicator(
        application, path, headers=all_headers, subprotocols=subprotocols
    )
    connected, _ = await comm.connect()
    assert connected
    client = Realtime(comm, secrets=(key,) if key else (), beta=beta, vllm=vllm)
    if created:
        event = await client.recv()
        assert event["type"] == "session.created", event
    return client


@pytest.fixture
def fast_vad_settings(settings: Any) -> Iterator[Any]:
    """Settings for fake-engine tests that do not need trimming."""
    settings.ASR_TRIM_NONSPEECH = False
    yield settings
