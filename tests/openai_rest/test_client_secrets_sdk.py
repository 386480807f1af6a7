"""Client secrets (issue 35) through the unmodified ``openai`` Python SDK, a TTS secret on
the socket, and ``GET /v1/audio/voices``, against the live embedded gateway (Piper,
faster-whisper).

``client.realtime.client_secrets.create(...)`` mints; a client holding only the secret
opens ``/v1/realtime`` with the secret's session already applied and transcribes; the same
secret is refused on every REST route, once expired, and once its key is revoked (by
another process: ``manage.py revoke_api_key``).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import openai
import pytest
from openai import OpenAI
from websockets.sync.client import connect as ws_connect

from tests.openai_rest.conftest import RestGateway
from tests.openai_rest.test_sdk_python import TEXT, assert_wer, speech_pcm  # noqa: F401

pytestmark = pytest.mark.slow

SESSION = {
    "type": "transcription",
    "audio": {
        "input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "transcription": {"model": "whisper-1", "language": "en"},
            "turn_detection": None,
        }
    },
}
SHORT_TTL_S = 10  # OpenAI's least


@dataclass
class Minter:
    """A key of its own account (revoked by one test), and a secret that will expire."""

    key_id: str
    raw: str
    short_lived: str
    short_expires_at: int


@pytest.fixture(scope="module")
def minter(rest_gateway: RestGateway) -> Minter:
    done = rest_gateway.manage_py(
        "create_api_key", "--account", "secrets", "--plan", "rest-rpm"
    )
    lines = done.stdout.strip().splitlines()
    key_id = next(x for x in lines if x.startswith("Key id:")).split()[-1]
    raw = lines[-1]
    short = sdk(rest_gateway, raw).realtime.client_secrets.create(
        expires_after={"anchor": "created_at", "seconds": SHORT_TTL_S}
    )
    return Minter(key_id, raw, short.value, short.expires_at)


def sdk(gw: RestGateway, key: str) -> OpenAI:
    return OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, timeout=60)


def realtime_events(
    gw: RestGateway, secret: str, pcm: bytes | None = None
) -> Iterator[Any]:
    """The events a client holding only ``secret`` gets; ``pcm`` is sent and committed."""
    client = sdk(gw, secret)
    with client.realtime.connect(
        extra_query={"intent": "transcription"}, max_retries=0
    ) as conn:
        if pcm is not None:
            for i in range(0, len(pcm), 4800):
                chunk = base64.b64encode(pcm[i : i + 4800]).decode()
                conn.input_audio_buffer.append(audio=chunk)
            conn.input_audio_buffer.commit()
        for event in conn:
            yield event
            if event.type in (
                "error",
                "conversation.item.input_audio_transcription.completed",
            ):
                return


def test_the_sdk_mints_a_realtime_secret_that_transcribes_with_its_session(
    rest_gateway: RestGateway,
    speech_pcm: np.ndarray,  # noqa: F811
    minter: Minter,  # its short-lived secret starts to age now
) -> None:
    secret = rest_gateway.client().realtime.client_secrets.create(
        expires_after={"anchor": "created_at", "seconds": 600}, session=SESSION
    )
    assert secret.value.startswith("ek_")
    assert abs(secret.expires_at - (time.time() + 600)) < 10
    assert secret.session.type == "transcription"
    audio = secret.session.audio.input  # type: ignore[union-attr]
    assert audio.turn_detection is None and audio.transcription.language == "en"
    events = list(realtime_events(rest_gateway, secret.value, speech_pcm.tobytes()))
    created = events[0]
    assert created.type == "session.created"
    applied = created.session.audio.input
    assert applied.turn_detection is None and applied.format.rate == 24000
    done = events[-1]
    assert done.type == "conversation.item.input_audio_transcription.completed"
    assert_wer(TEXT, done.transcript, "realtime with a client secret")
    records = rest_gateway.records()
    assert records[-1][:2] == ("asr", "completed")  # metered to the minting key


def test_a_secret_is_refused_on_rest(rest_gateway: RestGateway) -> None:
    secret = rest_gateway.client().realtime.client_secrets.create().value
    client = sdk(rest_gateway, secret)
    with pytest.raises(openai.AuthenticationError):
        client.models.list()
    with pytest.raises(openai.AuthenticationError):
        client.audio.speech.create(model="tts-1", voice="alloy", input="Hi.")
    with pytest.raises(openai.AuthenticationError):
        client.audio.transcriptions.create(model="whisper-1", file=("a.wav", b"x"))
    with pytest.raises(openai.AuthenticationError):
        client.realtime.client_secrets.create()  # a secret mints nothing


def test_an_expired_secret_is_refused(
    rest_gateway: RestGateway, minter: Minter
) -> None:
    time.sleep(max(0.0, minter.short_expires_at + 1 - time.time()))
    (event,) = realtime_events(rest_gateway, minter.short_lived)
    assert event.type == "error" and event.error.code == "invalid_api_key"


def test_a_secret_of_a_revoked_key_is_refused(
    rest_gateway: RestGateway, minter: Minter
) -> None:
    secret = sdk(rest_gateway, minter.raw).realtime.client_secrets.create().value
    assert next(realtime_events(rest_gateway, secret)).type == "session.created"
    rest_gateway.manage_py("revoke_api_key", minter.key_id, "--reason", "test")
    (event,) = realtime_events(rest_gateway, secret)
    assert event.type == "error" and event.error.code == "invalid_api_key"


def test_a_tts_secret_opens_the_socket_with_its_voice_and_format(
    rest_gateway: RestGateway,
) -> None:
    minted = rest_gateway.client().post(
        "/tts/client_secrets",
        cast_to=object,
        body={"session": {"voice": "male1", "format": "pcm", "sample_rate": 24000}},
    )
    assert minted["session"] == {  # type: ignore[index]
        "type": "tts",
        "voice": "joe",
        "format": "pcm",
        "sample_rate": 24000,
    }
    url = f"ws://127.0.0.1:{rest_gateway.port}/v1/tts/ws"
    offered = ["veena-tts", f"veena-api-key.{minted['value']}"]  # type: ignore[index]
    with ws_connect(url, subprotocols=offered) as ws:  # type: ignore[arg-type]
        assert ws.subprotocol == "veena-tts"
        ws.send(json.dumps({"text": "Hello from a secret.", "format": "wav"}))
        header = json.loads(ws.recv(timeout=60))
        samples = 0
        while isinstance(message := ws.recv(timeout=60), bytes):
            samples += len(message) // 2
        complete = json.loads(message)
    assert (header["format"], header["sample_rate"]) == ("pcm", 24000)
    assert complete["event"] == "complete"
    assert samples / 24000 == pytest.approx(
        complete["metrics"]["audio_duration_seconds"], abs=0.01
    )


def test_the_voices_list_is_the_speakers_list(rest_gateway: RestGateway) -> None:
    client = rest_gateway.client()
    voices = client.get("/audio/voices", cast_to=object)
    speakers = client.get("/tts/speakers", cast_to=object)
    models = {m.id for m in client.models.list()}
    listed = voices["data"]  # type: ignore[index]
    assert [v["id"] for v in listed] == [s["id"] for s in speakers["speakers"]]  # type: ignore[index]
    assert voices["voices"] == [v["id"] for v in listed]  # type: ignore[index]
    for voice, speaker in zip(listed, speakers["speakers"], strict=True):  # type: ignore[index]
        assert voice["name"] == speaker["name"]
        assert voice["language"] == speaker["languages"][0]
        assert voice["engine"] == speakers["engine"] == "piper"  # type: ignore[index]
        assert voice["sample_rate"] == speakers["native_sample_rate"] == 22050  # type: ignore[index]
        assert voice["model"] in models and voice["aliases"] == speaker["aliases"]
    joe = rest_gateway.client().audio.speech.create(
        model=listed[0]["model"],
        voice=listed[0]["id"],
        input="Hi.",
        response_format="pcm",
    )
    assert len(joe.content) > 1000  # every listed voice speaks
