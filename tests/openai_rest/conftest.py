"""A live embedded gateway (Piper + faster-whisper) with keys on plans that trip each limit."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
import pytest
from openai import OpenAI

from tests.conftest import ROOT, child_env, free_port, manage

PYTHON = str(ROOT / ".venv/bin/python")
MAX_SECONDS = 60  # OPENAI_TRANSCRIBE_MAX_SECONDS of the test gateway
MAX_BYTES = 3 * 1024 * 1024  # OPENAI_TRANSCRIBE_MAX_BYTES of the test gateway
# plan name → Plan fields; each key's account is on one of them.
BASE = {"requests_per_minute": 600, "max_concurrent_streams": 16}
BASE["max_session_seconds"] = 3600
PLANS = {
    "rest-open": BASE | {"max_concurrent_streams": 1},  # a leaked lease blocks the next
    "rest-rpm": BASE | {"requests_per_minute": 2},
    "rest-quota": BASE | {"monthly_tts_characters": 10, "monthly_asr_seconds": 1},
}
SETUP = """
from accounts.models.plans import Plan
import json
for name, fields in json.loads({plans!r}).items():
    Plan.objects.update_or_create(name=name, defaults=fields)
"""


@dataclass
class RestGateway:
    """The gateway child, its data directory, and one key per plan."""

    port: int
    data: Path
    env: dict[str, str]
    keys: dict[str, str]
    proc: subprocess.Popen[bytes]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def client(self, plan: str = "rest-open", **options: object) -> OpenAI:
        """The unmodified SDK, without retries (a 429 must reach the test)."""
        return OpenAI(
            base_url=self.base_url,
            api_key=self.keys[plan],
            max_retries=0,
            timeout=120,
            **options,  # type: ignore[arg-type]
        )

    def started_records(self) -> int:
        """Usage records still ``started`` (none may be, once calls have returned)."""
        code = (
            "from accounts.models.usage import UsageRecord; "
            "print(UsageRecord.objects.filter(status='started').count())"
        )
        done = self.manage_py("shell", "-c", code)
        return int(done.stdout.strip().splitlines()[-1])

    def records(self) -> list[tuple[str, str, str]]:
        """(endpoint, status, error_code) of every usage record, oldest first."""
        code = (
            "from accounts.models.usage import UsageRecord; import json; print(json.dumps("
            "list(UsageRecord.objects.order_by('started_at').values_list("
            "'endpoint', 'status', 'error_code'))))"
        )
        done = self.manage_py("shell", "-c", code)
        return [tuple(r) for r in json.loads(done.stdout.strip().splitlines()[-1])]

    def manage_py(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        )


def wait_ready(gw: RestGateway, limit_s: float = 90) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert gw.proc.poll() is None, (gw.data / "gateway.log").read_text()[-3000:]
        try:
            url = f"http://127.0.0.1:{gw.port}/readyz"
            with urllib.request.urlopen(url, timeout=2) as resp:
                workers = json.loads(resp.read()).get("workers", {})
                if workers.get("tts") and workers.get("asr"):
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.3)
    raise AssertionError("gateway not ready")


@pytest.fixture(scope="package")
def rest_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestGateway]:
    """The gateway of this package's tests, on the default settings."""
    with started_gateway(tmp_path_factory.mktemp("openai-rest")) as gw:
        yield gw


@contextmanager
def started_gateway(data: Path, **settings: str) -> Iterator[RestGateway]:
    """Migrate, create the plans and keys, start ``rungateway`` with ``settings`` (environment
    variables) in ``data``; stop it afterwards."""
    env = child_env(
        DJANGO_SETTINGS_MODULE="veena_site.settings",
        DATA_DIR=str(data),
        ENGINE_THREADS="2",
        OPENAI_TRANSCRIBE_MAX_SECONDS=str(MAX_SECONDS),
        OPENAI_TRANSCRIBE_MAX_BYTES=str(MAX_BYTES),
        **settings,
    )
    for name in ("TTS_ENGINE", "ASR_ENGINE", "WORKER_KINDS", "GATEWAY_KINDS"):
        env.pop(name, None)
    port = free_port()
    gw = RestGateway(port, data, env, {}, None)  # type: ignore[arg-type]
    gw.manage_py("migrate", "--noinput")
    gw.manage_py("shell", "-c", SETUP.format(plans=json.dumps(PLANS)))
    for plan in PLANS:
        minted = gw.manage_py("create_api_key", "--account", plan, "--plan", plan)
        gw.keys[plan] = minted.stdout.strip().splitlines()[-1]
    log = data / "gateway.log"
    with open(log, "wb") as out:
        gw.proc = manage(
            "rungateway",
            "--port",
            str(port),
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_ready(gw)
        yield gw
    finally:
        os.killpg(gw.proc.pid, signal.SIGTERM)
        try:
            gw.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(gw.proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert not any(key in text for key in gw.keys.values())


def decode_audio(data: bytes) -> tuple[np.ndarray, int]:
    """Any container to mono int16 samples and their rate (PyAV)."""
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        rate = stream.codec_context.sample_rate
        resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
        blocks = [
            out.to_ndarray().reshape(-1)
            for frame in container.decode(stream)
            for out in resampler.resample(frame)
        ]
    return np.concatenate(blocks).astype(np.int16), rate


# container name → (PyAV muxer, codec, file name)
CONTAINERS = {
    "wav": ("wav", "pcm_s16le", "speech.wav"),
    "mp3": ("mp3", "libmp3lame", "speech.mp3"),
    "flac": ("flac", "flac", "speech.flac"),
    "ogg": ("ogg", "libopus", "speech.ogg"),
    "m4a": ("ipod", "aac", "speech.m4a"),
    "webm": ("webm", "libopus", "speech.webm"),
}


def encode_container(pcm: np.ndarray, rate: int, name: str) -> bytes:
    """Mono int16 PCM in one of ``CONTAINERS`` (a real file, as a user would upload)."""
    muxer, codec, _ = CONTAINERS[name]
    out = io.BytesIO()
    with av.open(out, mode="w", format=muxer) as container:
        stream = container.add_stream(codec, rate=48000 if "opus" in codec else rate)
        stream.layout = "mono"  # type: ignore[union-attr]
        ctx = stream.codec_context  # type: ignore[union-attr]
        resampler = av.AudioResampler(
            format=ctx.format.name,
            layout="mono",
            rate=ctx.sample_rate,
            frame_size=ctx.frame_size or None,
        )
        frame = av.AudioFrame.from_ndarray(
            pcm.reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = rate
        frame.pts = 0
        for piece in [*resampler.resample(frame), *resampler.resample(None)]:
            for packet in stream.encode(piece):  # type: ignore[union-attr]
                container.mux(packet)
        for packet in stream.encode(None):  # type: ignore[union-attr]
            container.mux(packet)
    return out.getvalue()
