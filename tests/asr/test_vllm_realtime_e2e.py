"""Whisper on vLLM behind a live gateway: the unmodified openai SDK in both dialects.

The gateway is a ``rungateway`` child (embedded topology) with ``ASR_ENGINE=vllm`` and no
``ASR_VLLM_MODEL``, so it converts the bundled tiny.en into its fresh DATA_DIR itself; the
client → gateway → channel layer → worker → vLLM path is the one users run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai import AsyncOpenAI

from tests.asr.conftest import Clip, b64, silence
from tests.support.live_gateway import (
    COMPLETED,
    DELTA,
    Gateway,
    asr_gateway,
    assert_transcribed,
    check_flow,
    sdk_transcribe,
    server_vad_two_utterances,
)

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

LOAD_S = 600  # engine start on a loaded 2 vCPU machine
DECODE_S = 120


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from asr_gateway(
        tmp_path_factory.mktemp("vllm-gateway"),
        ready_s=LOAD_S,
        ASR_ENGINE="vllm",
        ASR_WORKER_SLOTS="4",
        ASR_VLLM_MAX_NUM_SEQS="8",
        ASR_VLLM_KV_CACHE_GIB="1",
    )


def both(clips: dict[str, Clip]) -> tuple[str, bytes]:
    text = clips["clip"].text + " " + clips["clip2"].text
    return text, clips["clip"].bytes_at(24000) + clips["clip2"].bytes_at(24000)


async def test_asr_vllm_openai_sdk_transcribes_piper_speech(
    gateway: Gateway, clips: dict[str, Clip]
) -> None:
    text, audio = both(clips)
    kinds, events = await sdk_transcribe(
        gateway,
        silence(0.3) + audio,
        {"type": "audio/pcm", "rate": 24000},
        chunk=4800,
        pace_s=0.05,  # 100 ms of audio every 50 ms: pre-commit chunk decodes run
        timeout=DECODE_S,
    )
    transcript = check_flow(kinds, events)
    assert_transcribed(text, transcript, "vLLM, OpenAI dialect")


async def test_asr_vllm_dialect_with_the_openai_sdk(
    gateway: Gateway, clips: dict[str, Clip]
) -> None:
    text = clips["clip"].text + " " + clips["clip2"].text
    pcm = clips["clip"].bytes_at(16000) + clips["clip2"].bytes_at(16000)
    client = AsyncOpenAI(base_url=gateway.http + "/v1", api_key=gateway.key)
    events: list[dict[str, Any]] = []
    async with client.realtime.connect(extra_query={"dialect": "vllm"}) as conn:
        assert json.loads(await conn.recv_bytes())["type"] == "session.created"
        update = {
            "type": "session.update",
            "model": "whisper-1",
            "transcript": "deltas",  # issue 34: done.text is the deltas joined
            "include": ["item.input_audio_transcription.logprobs"],
        }
        await conn.send(update)  # type: ignore[arg-type]
        assert json.loads(await conn.recv_bytes()) == {
            "type": "session.updated",
            "model": "whisper-1",
        }
        await conn.input_audio_buffer.commit()  # starts the generation (VL-4)
        for i in range(0, len(pcm), 3200):
            await conn.input_audio_buffer.append(audio=b64(pcm[i : i + 3200]))
            await asyncio.sleep(0.05)
        await conn.send({"type": "input_audio_buffer.commit", "final": True})  # type: ignore[arg-type, typeddict-unknown-key]
        async with asyncio.timeout(DECODE_S):
            while not events or events[-1]["type"] != "transcription.done":
                events.append(json.loads(await conn.recv_bytes()))
    assert {e["type"] for e in events} <= {"transcription.delta", "transcription.done"}
    deltas = [e["delta"] for e in events if e["type"] == "transcription.delta"]
    done = events[-1]
    assert done["text"] == "".join(deltas) and all(deltas)
    for event in events[:-1]:  # the engine's token log probabilities (VL-6)
        entries = event["logprobs"]
        assert "".join(e["token"] for e in entries) == event["delta"]
        assert entries and all(e["logprob"] <= 0 for e in entries)
    assert done["usage"]["completion_tokens"] > 0
    assert_transcribed(text, done["text"], "vLLM, vLLM dialect")


async def test_asr_vllm_a_40_s_item_transcribes_completely(
    gateway: Gateway, clips: dict[str, Clip]
) -> None:
    """Past Whisper's 30 s window: the streaming window slides at a segment end."""
    names = ["clip", "clip2", "numbers"] * 4
    text = " ".join(clips[n].text for n in names)
    audio = b"".join(clips[n].bytes_at(24000) + silence(0.25) for n in names)
    assert 38 < len(audio) / 48000 < 45
    kinds, events = await sdk_transcribe(
        gateway,
        audio,
        {"type": "audio/pcm", "rate": 24000},
        chunk=4800,
        pace_s=0.025,  # 4 × real time
        timeout=DECODE_S,
    )
    transcript = check_flow(kinds, events)
    early = kinds.index("input_audio_buffer.committed")
    print(f"{kinds[:early].count(DELTA)} deltas before the commit")
    assert_transcribed(text, transcript, "vLLM, 40 s item")
    assert next(e for e in events if e.type == COMPLETED).usage.seconds > 38


async def test_asr_vllm_server_vad_commits_each_utterance(
    gateway: Gateway, clips: dict[str, Clip]
) -> None:
    await server_vad_two_utterances(gateway, clips, timeout=DECODE_S)
