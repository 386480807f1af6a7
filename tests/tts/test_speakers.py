"""Speakers (docs/specs/tts-ws.md §8, H6–H7): resolution, the error list, the listing."""

from __future__ import annotations

import pytest

from tts.engine_info import ENGINE_INFO
from tts.speakers import (
    UnknownSpeaker,
    accepted_names,
    resolve_speaker,
    speakers_listing,
)

PIPER = ENGINE_INFO["piper"]
REFERENCE = ("male1", "kavya", "agastya", "maitri", "vinaya")


def test_tts_s1_piper_declares_joe() -> None:
    assert PIPER.voice_ids == ("joe",)


@pytest.mark.parametrize("name", ["joe", " JOE ", "<spk_joe>", "<SPK_Joe>", *REFERENCE])
def test_tts_s2_s3_trim_case_unwrap_and_reference_aliases(name: str) -> None:
    assert resolve_speaker(name, PIPER) == "joe"


def test_tts_s3_default_speaker_resolves_on_every_engine() -> None:
    for info in ENGINE_INFO.values():
        for name in REFERENCE:
            assert resolve_speaker(name, info) in info.voice_ids


def test_tts_s4_unknown_speaker_lists_every_accepted_name() -> None:
    with pytest.raises(UnknownSpeaker) as info:
        resolve_speaker("Zed", PIPER)
    valid = ["agastya", "en_us-joe-medium", "joe", "kavya", "maitri", "male1", "vinaya"]
    assert info.value.valid == valid
    assert (
        info.value.message
        == f"Unknown speaker 'Zed'. Valid speakers: {', '.join(valid)}"
    )


def test_tts_s2_deployment_aliases_override_and_extend() -> None:
    overrides = {"piper": {"narrator": "joe", "ghost": "nobody"}}
    assert resolve_speaker("Narrator", PIPER, overrides) == "joe"
    with pytest.raises(UnknownSpeaker):
        resolve_speaker("ghost", PIPER, overrides)  # an alias must name a voice
    assert "narrator" in accepted_names(PIPER, overrides)


def test_tts_h6_h7_listing_shape() -> None:
    body = speakers_listing(PIPER, ready=True)
    assert body == {
        "engine": "piper",
        "model_version": "piper/en_US-joe-medium",
        "ready": True,
        "native_sample_rate": 22050,
        "sample_rates": [8000, 16000, 22050, 24000, 44100, 48000],
        "formats": ["wav", "pcm", "mulaw"],
        "default_speaker": "male1",
        "capabilities": {
            "speed": True,
            "seed": False,
            "sampling_params": False,
            "timestamps": "sentence",
            "word_timestamps": "durations",
        },
        "speakers": [
            {
                "id": "joe",
                "name": "Joe",
                "languages": ["en-US"],
                "gender": None,
                "default": True,
                "aliases": ["agastya", "en_us-joe-medium", "kavya", "maitri", "male1", "vinaya"],
            }
        ],
    }  # fmt: skip


@pytest.mark.parametrize("engine", sorted(ENGINE_INFO))
def test_tts_s5_listed_names_are_exactly_the_accepted_names(engine: str) -> None:
    info = ENGINE_INFO[engine]
    listing = speakers_listing(info, ready=False)
    listed = {s["id"] for s in listing["speakers"]}
    listed |= {a for s in listing["speakers"] for a in s["aliases"]}
    assert sorted(listed) == accepted_names(info)
    for name in listed:
        resolve_speaker(name, info)
    for name in ("nobody", "joe2", "", "male"):
        with pytest.raises(UnknownSpeaker):
            resolve_speaker(name, info)
