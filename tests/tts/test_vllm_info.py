"""What the gateway knows about TTS_ENGINE=vllm from its settings alone (tts S1–S5, H6, R5).

No vLLM tier is needed: the gateway never imports it. The worker side refuses voices its
checkpoint lacks (test_vllm_stack.py), so the list below is what the engine serves.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.tts.conftest import Opener
from tests.tts.test_rest import auth, request
from tts.engine_info import engine_info
from tts.speakers import accepted_names, resolve_speaker, speakers_listing
from tts.worker.engines import load_vllm

REFERENCE = ("male1", "kavya", "agastya", "maitri", "vinaya")


@pytest.fixture
def vllm_settings(settings: Any) -> Any:
    settings.TTS_ENGINE = "vllm"
    settings.TTS_VLLM_MODEL = "/models/Veena"
    return settings


def test_tts_s1_veena_declares_the_four_card_voices(vllm_settings: Any) -> None:
    info = engine_info("vllm")
    assert info.voice_ids == ("agastya", "kavya", "maitri", "vinaya")
    assert (info.wire_name, info.native_rate) == ("vllm-snac", 24_000)
    assert info.model_version == "vllm-snac/Veena"
    assert info.voices[0].languages == ("hi-IN", "en-IN")
    assert resolve_speaker("male1", info) == "agastya"
    assert [resolve_speaker(n, info) for n in REFERENCE[1:]] == list(REFERENCE[1:])


def test_tts_s1_s3_orpheus_voices_and_aliases(vllm_settings: Any) -> None:
    vllm_settings.TTS_VLLM_RECIPE = "orpheus"
    info = engine_info("vllm")
    assert set(info.voice_ids) == {
        "tara",
        "leah",
        "jess",
        "leo",
        "dan",
        "mia",
        "zac",
        "zoe",
    }
    assert resolve_speaker("male1", info) == "leo"
    assert resolve_speaker("agastya", info) == "leo"
    assert {resolve_speaker(n, info) for n in ("kavya", "maitri", "vinaya")} == {"tara"}


def test_tts_s1_configured_voices_narrow_the_list_and_male1_still_resolves(
    vllm_settings: Any,
) -> None:
    vllm_settings.TTS_VLLM_VOICES = ["Kavya"]
    info = engine_info("vllm")
    assert info.voice_ids == ("kavya",)
    assert resolve_speaker("male1", info) == "kavya"
    assert accepted_names(info) == ["kavya", "male1"]


@pytest.mark.parametrize("recipe", ["veena", "orpheus"])
def test_tts_s5_h7_listing_is_exactly_the_accepted_names(
    vllm_settings: Any, recipe: str
) -> None:
    vllm_settings.TTS_VLLM_RECIPE = recipe
    info = engine_info("vllm")
    listing = speakers_listing(info, ready=True)
    listed = {s["id"] for s in listing["speakers"]}
    listed |= {a for s in listing["speakers"] for a in s["aliases"]}
    assert sorted(listed) == accepted_names(info)
    assert listing["capabilities"] == {
        "speed": False,
        "seed": True,
        "sampling_params": True,
        "timestamps": "sentence",
        "word_timestamps": "estimate",
    }
    assert sum(s["default"] for s in listing["speakers"]) == 1


async def test_tts_h6_speakers_endpoint_lists_the_vllm_voices_without_a_worker(
    vllm_settings: Any, api_key: str
) -> None:
    body = (await request("GET", "/v1/tts/speakers", headers=auth(api_key))).json()
    assert (body["engine"], body["ready"]) == ("vllm-snac", False)
    assert [s["id"] for s in body["speakers"]] == [
        "agastya",
        "kavya",
        "maitri",
        "vinaya",
    ]


async def test_tts_r5_speed_is_refused_on_vllm_snac(
    vllm_settings: Any, open_stream: Opener
) -> None:
    stream = await open_stream()
    await stream.send({"text": "Hello world.", "speed": 1.5})
    error = (await stream.event("error"))["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert error["message"] == "speed is not supported by engine vllm-snac"


def test_vllm_engine_without_the_tier_fails_with_one_line(
    vllm_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.worker import vllm_env

    monkeypatch.setattr(vllm_env, "vllm_installed", lambda: False)
    with pytest.raises(vllm_env.VllmUnavailable) as missing:
        load_vllm()
    assert str(missing.value).startswith("TTS_ENGINE=vllm needs the vLLM engine tier")
    assert "\n" not in str(missing.value)
