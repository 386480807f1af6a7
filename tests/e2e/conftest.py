"""Browser fixtures: Debian's Chromium through Playwright, and a live gateway on the test DB.

Playwright never downloads a browser here: it drives ``/usr/bin/chromium`` (``make
browser`` or ``.ci/run`` installs it). The gateway is ``manage.py rungateway`` in a child
process (HTTP and WebSockets, the embedded fake-engine worker) reading this test run's
SQLite database, so what a test seeds the browser sees.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IN_CI, ROOT, child_env, free_port, manage

CHROMIUM = "/usr/bin/chromium"
# Known to work headless as root on this machine kind, with no network beyond loopback.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = ROOT / "var" / "artifacts" / "e2e"

# Playwright's sync API runs an event loop in the test thread (playwright-pytest #29).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless Chromium for one test module.

    Not for the session: Playwright's sync API keeps an event loop running in this
    thread while it is open, and every async test after it would find that loop.
    """
    if not Path(CHROMIUM).exists():
        if IN_CI:
            pytest.fail(f"{CHROMIUM} is missing; .ci/run installs it (make browser)")
        pytest.skip(f"{CHROMIUM} is missing: run `make browser`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        yield browser
        browser.close()


@pytest.fixture
def browser_context(chromium: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh 1280×800 context (own cookies); screenshots land in var/artifacts/e2e."""
    zone = getattr(request, "param", "UTC")
    context = chromium.new_context(
        viewport={"width": 1280, "height": 800}, timezone_id=zone, accept_downloads=True
    )
    yield context
    context.close()


def screenshot(page: Any, name: str) -> Path:
    """Save a full-page screenshot as a test artifact and say where."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def _wait_up(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError("gateway exited:\n" + log.read_text()[-3000:])
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
    raise AssertionError("gateway not up within 60 s:\n" + log.read_text()[-3000:])


@pytest.fixture(scope="module")
def live_gateway(
    django_db_setup: None,
    django_db_blocker: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a gateway that reads this run's test database."""
    from django.db import connection

    with django_db_blocker.unblock():
        name = connection.settings_dict["NAME"]
        assert connection.vendor == "sqlite" and name and name != ":memory:", name
    data_dir = tmp_path_factory.mktemp("gateway")
    log = data_dir / "gateway.log"
    port = free_port()
    env = child_env(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=f"sqlite:///{name}",
        DATA_DIR=str(data_dir),
        FAKE_TTS_CHUNK_DELAY_S="0.1",  # a stream lasts long enough to revoke during it
        GATEWAY_KINDS="tts",
    )
    with log.open("wb") as out:
        proc = manage(
            "rungateway",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
