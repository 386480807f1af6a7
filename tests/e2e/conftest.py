"""Browser fixtures: Debian's Chromium through Playwright, and a live gateway on the test DB.

Playwright never downloads a browser here: it drives ``/usr/bin/chromium`` (``make
browser`` or ``.ci/run`` installs it). The gateway is ``manage.py rungateway`` in a child
process (HTTP and WebSockets, the embedded fake-engine worker) reading this test run's
SQLite database, so what a test seeds the browser sees.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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
def chromium_extra_args() -> list[str]:
    """Launch flags a test module adds to ``CHROMIUM_ARGS`` (override it in the module)."""
    return []


@pytest.fixture(scope="module")
def chromium(chromium_extra_args: list[str]) -> Iterator[Any]:
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
            executable_path=CHROMIUM,
            args=[*CHROMIUM_ARGS, *chromium_extra_args],
            headless=True,
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


def record_foreign_requests(page: Any, base: str) -> None:
    """Collect, on ``page.foreign_requests``, every request to an origin other than ``base``
    (the pages load nothing from elsewhere: no CDN, no fonts)."""
    here = urlsplit(base).netloc
    page.foreign_requests = []
    page.on(
        "request",
        lambda r: (
            urlsplit(r.url).netloc in (here, "") or page.foreign_requests.append(r.url)
        ),
    )


def watched(context: Any, base: str) -> Any:
    """A new page that records requests to other origins (``foreign_requests``), answers
    of 400 or more and script errors (``problems``)."""
    page = context.new_page()
    record_foreign_requests(page, base)
    page.problems = []
    page.on(
        "response",
        lambda r: r.status < 400 or page.problems.append(f"{r.status} {r.url}"),
    )
    page.on("pageerror", lambda e: page.problems.append(f"script error {e}"))
    return page


def _wait_up(
    url: str, proc: subprocess.Popen[bytes], log: Path, *, path: str = "/healthz"
) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError("gateway exited:\n" + log.read_text()[-3000:])
        try:
            with urllib.request.urlopen(url + path, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
    raise AssertionError(
        f"gateway not up within 90 s ({path}):\n" + log.read_text()[-3000:]
    )


@contextlib.contextmanager
def gateway_on_test_db(
    tmp_path_factory: pytest.TempPathFactory,
    django_db_blocker: Any,
    *,
    settings_module: str = "tests.settings",
    wait_path: str = "/healthz",
    **env: object,
) -> Iterator[str]:
    """``manage.py rungateway`` on this run's test database; yields its URL.

    ``wait_path="/readyz"`` also waits for the engines to load.
    """
    from django.db import connection

    with django_db_blocker.unblock():
        name = connection.settings_dict["NAME"]
        assert connection.vendor == "sqlite" and name and name != ":memory:", name
    data_dir = tmp_path_factory.mktemp("gateway")
    log = data_dir / "gateway.log"
    port = free_port()
    environment = child_env(
        DJANGO_SETTINGS_MODULE=settings_module,
        DATABASE_URL=f"sqlite:///{name}",
        DATA_DIR=str(data_dir),
        **env,
    )
    with log.open("wb") as out:
        proc = manage(
            "rungateway",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url, proc, log, path=wait_path)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def live_gateway(
    django_db_setup: None,
    django_db_blocker: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a gateway that reads this run's test database."""
    with gateway_on_test_db(
        tmp_path_factory,
        django_db_blocker,
        FAKE_TTS_CHUNK_DELAY_S=0.1,  # a stream lasts long enough to revoke during it
        GATEWAY_KINDS="tts",
    ) as url:
        yield url
