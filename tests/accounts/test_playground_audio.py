"""The playground's own audio code (accounts/static/accounts/playground), run under Node.

The microphone worklet's resampler must be stateful (any chunking of the input gives the
same output, as realtime AI-3 demands of the server's), keep a tone's shape and keep
what lies above the lower Nyquist frequency out; μ-law decoding must match the server's
G.711 tables bit for bit, and the downloaded WAV must be a file Python reads.
"""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
import wave
from typing import Any

import numpy as np
import pytest

from gateway.pcm import ulaw2lin
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def computed() -> dict[str, Any]:
    node = shutil.which("node")
    assert node, "Node >= 20 is required"
    done = subprocess.run(
        [node, str(ROOT / "tests/accounts/playground_audio.mjs")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize("case", range(4))
def test_capture_resampler_is_stateful_and_faithful(
    computed: dict[str, Any], case: int
) -> None:
    r = computed["resampling"][case]
    expected = round(r["inputSamples"] * r["outRate"] / r["inRate"])
    assert abs(r["outputSamples"] - expected) <= 1
    assert r["chunkedSamples"] == r["outputSamples"]
    assert r["chunkingDiff"] < 1e-6  # block boundaries leave no trace
    assert r["toneError"] < 1e-3  # a 1 kHz tone at amplitude 0.5 keeps its shape
    if r["aliasRms"] is not None:  # a tone above the output's Nyquist: > 50 dB down
        assert r["aliasRms"] < 1e-3


def test_pcm16_conversion_clips_and_rounds(computed: dict[str, Any]) -> None:
    assert computed["pcm16"] == [-32767, -32767, -16383, 0, 16384, 32767, 32767]


def test_mulaw_decoding_matches_the_servers_g711_tables(
    computed: dict[str, Any],
) -> None:
    assert computed["mulaw"] == ulaw2lin(bytes(range(256))).tolist()


def test_downloaded_wav_is_a_valid_pcm16_file(computed: dict[str, Any]) -> None:
    with wave.open(io.BytesIO(base64.b64decode(computed["wav"]))) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 16000)
        frames = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    assert frames.tolist() == [1, -2, 32767, -32768]
    assert computed["base64"] == base64.b64encode(bytes(range(256))).decode()
