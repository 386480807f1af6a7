"""TLS without a proxy: the gateway's endpoint strings, and https/wss from the gateway itself.

The embedded topology over TLS is exercised by tests/e2e/test_examples.py (the openai npm SDK
dials only ``wss:``); here the distributed gateway (``rungateway`` on Redis) serves https.
"""

from __future__ import annotations

import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.core.management.base import CommandError

from tests.conftest import child_env, free_port, manage
from tests.e2e.test_serve import stop
from tests.support.tls import make_certificates
from veena_site.endpoints import checked_listen, escape, gateway_listen


def test_plain_tcp_without_tls_settings(settings) -> None:
    settings.TLS_CERT_FILE = settings.TLS_KEY_FILE = ""
    listen = gateway_listen("127.0.0.1", 8000)
    assert listen.endpoints == ["tcp:port=8000:interface=127.0.0.1"]
    assert listen.url == "http://127.0.0.1:8000"


def test_ssl_endpoint_with_both_files(settings, tmp_path: Path) -> None:
    certs = make_certificates(tmp_path)
    settings.TLS_CERT_FILE, settings.TLS_KEY_FILE = str(certs.cert), str(certs.key)
    listen = gateway_listen("::1", 8443)
    assert listen.endpoints == [
        f"ssl:port=8443:interface=\\:\\:1:privateKey={escape(str(certs.key))}"
        f":certKey={escape(str(certs.cert))}"
    ]
    assert listen.url == "https://[::1]:8443"


def test_a_full_chain_file_also_serves_the_chain(settings, tmp_path: Path) -> None:
    certs = make_certificates(tmp_path)
    chain = tmp_path / "fullchain.pem"
    chain.write_bytes(certs.cert.read_bytes() + certs.ca.read_bytes())
    settings.TLS_CERT_FILE, settings.TLS_KEY_FILE = str(chain), str(certs.key)
    assert (
        gateway_listen("127.0.0.1", 1)
        .endpoints[0]
        .endswith(f":extraCertChain={escape(str(chain))}")
    )


def test_escape_quotes_endpoint_syntax() -> None:
    assert escape("C:\\a=b") == "C\\:\\\\a\\=b"


@pytest.mark.parametrize("case", ["only_cert", "missing_file", "wrong_key", "not_pem"])
def test_bad_tls_settings_are_one_clear_line(
    settings, tmp_path: Path, case: str
) -> None:
    certs = make_certificates(tmp_path)
    (tmp_path / "other").mkdir()
    other = make_certificates(tmp_path / "other")
    settings.TLS_CERT_FILE, settings.TLS_KEY_FILE = {
        "only_cert": (str(certs.cert), ""),
        "missing_file": (str(tmp_path / "nope.pem"), str(certs.key)),
        "wrong_key": (str(certs.cert), str(other.key)),
        "not_pem": (str(certs.cert), str(tmp_path / "junk")),
    }[case]
    (tmp_path / "junk").write_text("not a key")
    with pytest.raises(CommandError) as raised:
        checked_listen("127.0.0.1", 1)
    message = str(raised.value)
    assert "\n" not in message and ("TLS_" in message)
    assert "PRIVATE KEY" not in message


def https_get(url: str, context: ssl.SSLContext, limit_s: float = 60) -> int:
    deadline = time.monotonic() + limit_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


@pytest.mark.slow
@pytest.mark.redis
def test_distributed_gateway_serves_https(tmp_path: Path, redis_url: str) -> None:
    certs = make_certificates(tmp_path)
    port = free_port()
    env = child_env(
        DJANGO_SETTINGS_MODULE="veena_site.settings",
        DATA_DIR=str(tmp_path),
        REDIS_URL=redis_url,
        TLS_CERT_FILE=str(certs.cert),
        TLS_KEY_FILE=str(certs.key),
    )
    log = tmp_path / "gateway.log"
    with open(log, "wb") as out:
        proc = manage(
            "rungateway",
            "--port",
            str(port),
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        trusted = ssl.create_default_context(cafile=str(certs.ca))
        assert https_get(f"https://127.0.0.1:{port}/healthz", trusted) == 200
        with pytest.raises(urllib.error.URLError):  # the system CAs do not trust it
            urllib.request.urlopen(
                f"https://127.0.0.1:{port}/healthz",
                timeout=5,
                context=ssl.create_default_context(),
            )
    finally:
        stop(proc)
    assert f"gateway listening on https://127.0.0.1:{port}" in log.read_text()
