"""The unmodified ``openai`` npm SDK (examples/node, Node >= 20) on ``/v1/audio/speech`` and
``/v1/audio/transcriptions``: ``examples/node/audio_rest.mjs`` as it is."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, child_env
from tests.openai_rest.conftest import RestGateway
from tests.openai_rest.test_sdk_python import TEXT, assert_wer

pytestmark = pytest.mark.slow

NODE_DIR = ROOT / "examples/node"


def test_npm_sdk_speech_and_transcriptions(
    rest_gateway: RestGateway, tmp_path: Path
) -> None:
    node = shutil.which("node")
    assert node, "Node >= 20 is required"
    assert (NODE_DIR / "node_modules/openai").exists(), "run make node-examples"
    out = tmp_path / "speech.mp3"
    env = child_env(
        VEENA_URL=f"http://127.0.0.1:{rest_gateway.port}",
        VEENA_API_KEY=rest_gateway.keys["rest-open"],
    )
    done = subprocess.run(
        [node, "audio_rest.mjs", str(out), TEXT],
        cwd=NODE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    assert out.stat().st_size > 10_000
    assert_wer(TEXT, lines["text"], "npm whole")
    assert_wer(TEXT, lines["stream"], "npm stream")
