"""Every file in ``examples/`` runs as it is against ``make serve`` over TLS (https/wss).

The service gets a certificate from a test CA (``TLS_CERT_FILE`` / ``TLS_KEY_FILE``); each
client trusts it the way its README says: ``SSL_CERT_FILE`` (Python), ``CURL_CA_BUNDLE``
(curl), ``NODE_EXTRA_CA_CERTS`` (Node), ``--cacert`` (veena). The openai npm SDK example runs
from ``npm ci`` of the committed lock (``make node-examples``). The browser page's client module
runs under Node's WHATWG WebSocket with the page's subprotocol auth.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import sys
import urllib.request
import wave
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, child_env, free_port
from tests.e2e.conftest import screenshot
from tests.e2e.test_serve import mint_key, serve, stop, wait_ready
from tests.support.tls import CertificateFiles, make_certificates
from tests.wer import word_error_rate

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

EXAMPLES = ROOT / "examples"
TEXT = (
    "The quick brown fox jumps over the lazy dog. This is a test of the speech gateway."
)


@dataclass(frozen=True)
class TlsService:
    port: int
    key: str
    certs: CertificateFiles
    data: Path

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def env(self, **extra: str) -> dict[str, str]:
        ca = str(self.certs.ca)
        values = {"VEENA_URL": self.url, "VEENA_API_KEY": self.key}
        values.update(SSL_CERT_FILE=ca, CURL_CA_BUNDLE=ca, NODE_EXTRA_CA_CERTS=ca)
        return child_env(**{**values, **extra})


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsService]:
    data = tmp_path_factory.mktemp("tls-serve")
    certs = make_certificates(data)
    env = {"TLS_CERT_FILE": str(certs.cert), "TLS_KEY_FILE": str(certs.key)}
    port = free_port()
    proc = serve(data, port, **env)
    try:
        wait_ready(port, proc, tls=ssl.create_default_context(cafile=str(certs.ca)))
        yield TlsService(port, mint_key(data), certs, data)
    finally:
        stop(proc)
    log = (data / "serve.log").read_text()
    assert f"gateway listening on https://127.0.0.1:{port}" in log
    assert "vk_live_" not in log


def run(
    args: list[str], env: dict[str, str], cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def wav_frames(path: Path) -> tuple[int, int]:
    with wave.open(str(path)) as w:
        assert w.getnchannels() == 1 and w.getsampwidth() == 2
        return w.getframerate(), w.getnframes()


@pytest.fixture(scope="module")
def speech(service: TlsService, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/tts_websockets.py: a 24 kHz WAV of TEXT, with its complete metrics."""
    out = tmp_path_factory.mktemp("speech") / "speech.wav"
    done = run(
        [sys.executable, str(EXAMPLES / "tts_websockets.py"), TEXT, str(out)],
        service.env(),
    )
    metrics = json.loads(done.stdout)
    rate, frames = wav_frames(out)
    assert rate == 24000
    assert frames / rate == pytest.approx(metrics["audio_duration_seconds"], abs=0.01)
    return out


def test_python_websockets_tts_example(speech: Path) -> None:
    assert wav_frames(speech)[1] > 24000  # more than a second of speech


def test_curl_rest_tts_example(service: TlsService, tmp_path: Path) -> None:
    out = tmp_path / "curl.wav"
    run(["sh", str(EXAMPLES / "tts_curl.sh"), TEXT, str(out)], service.env())
    rate, frames = wav_frames(out)
    assert rate == 24000 and frames > 24000
    bad = subprocess.run(
        ["sh", str(EXAMPLES / "tts_curl.sh"), TEXT, str(tmp_path / "bad.wav")],
        env=service.env(VEENA_API_KEY="vk_live_" + "B" * 38),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        bad.returncode == 1 and "HTTP 401" in bad.stderr and "AUTH_FAILED" in bad.stderr
    )
    assert not (tmp_path / "bad.wav").exists()


def test_openai_python_realtime_example(service: TlsService, speech: Path) -> None:
    done = run(
        [sys.executable, str(EXAMPLES / "transcribe_openai.py"), str(speech)],
        service.env(),
    )
    assert word_error_rate(TEXT, done.stdout) <= 0.15, done.stdout


@pytest.mark.parametrize("scheme", ["https", "http"])
def test_openai_npm_realtime_example_over_wss(
    service: TlsService, speech: Path, scheme: str
) -> None:
    """With an http:// base URL the SDK still dials wss:// (and so reaches this TLS port)."""
    node = shutil.which("node")
    assert node, "Node >= 20 is required"
    assert (EXAMPLES / "node/node_modules/openai").exists(), "run make node-examples"
    done = run(
        [node, "transcribe.mjs", str(speech)],
        service.env(VEENA_URL=f"{scheme}://127.0.0.1:{service.port}"),
        cwd=EXAMPLES / "node",
    )
    assert word_error_rate(TEXT, done.stdout) <= 0.15, done.stdout + done.stderr


def test_openai_npm_rest_example_over_https(
    service: TlsService, tmp_path: Path
) -> None:
    """examples/node/audio_rest.mjs: speech, then its file transcribed whole and streamed."""
    node = shutil.which("node")
    assert node, "Node >= 20 is required"
    assert (EXAMPLES / "node/node_modules/openai").exists(), "run make node-examples"
    out = tmp_path / "speech.mp3"
    done = run(
        [node, "audio_rest.mjs", str(out), TEXT], service.env(), cwd=EXAMPLES / "node"
    )
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    assert out.stat().st_size > 10_000
    assert word_error_rate(TEXT, lines["text"]) <= 0.15, done.stdout
    assert word_error_rate(TEXT, lines["stream"]) <= 0.15, done.stdout


def test_browser_page_client_streams_with_subprotocol_auth(service: TlsService) -> None:
    node = shutil.which("node")
    assert node, "Node >= 20 is required"
    page = (EXAMPLES / "browser/page.js").read_text()
    assert 'import { speak, player } from "./veena-tts.js"' in page
    done = run(
        [
            node,
            "--experimental-websocket",
            "--no-warnings",
            str(ROOT / "tests/e2e/browser_tts.mjs"),
            f"wss://127.0.0.1:{service.port}",
            TEXT,
        ],
        service.env(),
    )
    result = json.loads(done.stdout)
    assert result["header"]["sample_rate"] == 24000
    seconds = result["samples"] / 24000
    assert seconds == pytest.approx(
        result["metrics"]["audio_duration_seconds"], abs=0.01
    )
    assert seconds > 1


def test_veena_cli_over_wss(service: TlsService, tmp_path: Path) -> None:
    veena = str(ROOT / ".venv/bin/veena")
    env = child_env(VEENA_URL=service.url, VEENA_API_KEY=service.key)
    out = tmp_path / "cli.wav"
    run([veena, "say", TEXT, "-o", str(out), "--cacert", str(service.certs.ca)], env)
    done = run([veena, "transcribe", str(out), "--cacert", str(service.certs.ca)], env)
    assert word_error_rate(TEXT, done.stdout) <= 0.15
    untrusted = subprocess.run(
        [veena, "say", TEXT, "-o", str(tmp_path / "x.wav")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert untrusted.returncode == 8 and "not trusted" in untrusted.stderr


def revoked_key_secret(service: TlsService) -> str:
    """A realtime client secret of a key that another process then revokes."""
    env = child_env(
        DJANGO_SETTINGS_MODULE="veena_site.settings", DATA_DIR=str(service.data)
    )
    manage = [sys.executable, "manage.py"]
    made = run([*manage, "create_api_key", "--account", "revoked"], env).stdout
    lines = made.strip().splitlines()
    key_id = next(x for x in lines if x.startswith("Key id:")).split()[-1]
    request = urllib.request.Request(
        service.url + "/v1/realtime/client_secrets",
        data=b"{}",
        headers={
            "Authorization": f"Bearer {lines[-1]}",
            "Content-Type": "application/json",
        },
    )
    tls = ssl.create_default_context(cafile=str(service.certs.ca))
    with urllib.request.urlopen(request, timeout=30, context=tls) as response:
        secret = json.load(response)["value"]
    run([*manage, "revoke_api_key", key_id, "--reason", "test"], env)
    return str(secret)


def test_openai_npm_mints_and_uses_a_realtime_secret(
    service: TlsService, speech: Path
) -> None:
    node = shutil.which("node")
    assert node, "Node >= 20 is required"
    env = service.env(VEENA_REVOKED_SECRET=revoked_key_secret(service))
    script = str(ROOT / "tests/e2e/realtime_secret.mjs")
    result = json.loads(run([node, script, str(speech)], env).stdout)
    assert result["value"] == "ek_" and result["session"]["type"] == "transcription"
    created, completed = result["used"]
    assert created["input"]["turn_detection"] is None  # the secret's session, applied
    assert created["input"]["transcription"]["language"] == "en"
    assert word_error_rate(TEXT, completed["transcript"]) <= 0.15
    assert result["rest"] == 401
    assert result["revoked"] == [{"type": "error", "code": "invalid_api_key"}]
    assert result["expired"] == [{"type": "error", "code": "invalid_api_key"}]


def test_browser_page_plays_with_a_secret_from_its_backend_in_chromium(
    service: TlsService, chromium: Any
) -> None:
    port = free_port()
    backend = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "browser/server.py"), str(port)],
        env=service.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert backend.stdout is not None and b"serving" in backend.stdout.readline()
        # Chromium trusts the test CA's gateway as the page's user would have to.
        context = chromium.new_context(ignore_https_errors=True)
        page = context.new_page()
        sent: list[str] = []
        page.on("request", lambda r: sent.append(r.url + (r.post_data or "")))
        page.on("websocket", lambda ws: sent.append(ws.url))
        page.goto(f"http://127.0.0.1:{port}/")
        page.click("#play")
        page.wait_for_selector("#status[data-metrics]", timeout=60_000)
        screenshot(page, "browser-example")
        metrics = json.loads(page.get_attribute("#status", "data-metrics") or "{}")
        html = page.content()
        context.close()
    finally:
        backend.terminate()
        backend.wait(timeout=10)
    assert metrics["audio_duration_seconds"] > 1 and not metrics["cancelled"]
    assert metrics["sample_rate"] == 24000  # pinned by the backend's secret
    assert f"wss://127.0.0.1:{service.port}/v1/tts/ws" in sent
    assert service.key not in html and not any(service.key in s for s in sent)
