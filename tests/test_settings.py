"""Settings: the embedded default with no environment, PostgreSQL + Redis when set."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import ROOT, child_env

PROBE = (
    "import django, json; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'db': s.DATABASES['default']['ENGINE'], "
    "'layer': s.CHANNEL_LAYERS['default']['BACKEND'], 'broker': s.CELERY_BROKER_URL, "
    "'eager': s.CELERY_TASK_ALWAYS_EAGER}))"
)


def probe(
    tmp_path: object,
    code: str = PROBE,
    *,
    module: str = "veena_site.settings",
    raw: dict[str, str] | None = None,
    **env: str,
) -> Any:
    """``code``'s last line of JSON, in a child on ``module`` with ``env`` (``raw``: set as
    environment variables even where they name constants)."""
    environment = child_env(
        DJANGO_SETTINGS_MODULE=module, DATA_DIR=str(tmp_path), **env
    )
    environment.update(raw or {})
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_embedded_default_without_environment(tmp_path: object) -> None:
    got = probe(tmp_path)
    assert got == {
        "db": "django.db.backends.sqlite3",
        "layer": "gateway.layers.memory_layer.EmbeddedChannelLayer",
        "broker": "memory://",
        "eager": True,
    }


def test_secret_key_is_generated_once_and_kept(tmp_path: object) -> None:
    probe(tmp_path)
    first = (tmp_path / "secret_key").read_text()
    probe(tmp_path)
    assert (tmp_path / "secret_key").read_text() == first and len(first) >= 50


SECURITY_PROBE = (
    "import django, json; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({n: getattr(s, n) for n in ("
    "'SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SECURE_PROXY_SSL_HEADER', "
    "'SECURE_HSTS_SECONDS', 'SECURE_HSTS_INCLUDE_SUBDOMAINS', 'SECURE_HSTS_PRELOAD', "
    "'ALLOW_QUERY_API_KEY')}))"
)


def security(tmp_path: object, **env: str) -> dict[str, object]:
    return probe(tmp_path, SECURITY_PROBE, **env)


def test_production_defaults_are_secure(tmp_path: object) -> None:
    got = security(tmp_path, PRODUCTION="true", SECRET_KEY="s" * 50)
    assert got == {
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_PROXY_SSL_HEADER": None,
        "SECURE_HSTS_SECONDS": 0,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": False,
        "SECURE_HSTS_PRELOAD": False,
        "ALLOW_QUERY_API_KEY": False,
    }
    assert security(tmp_path)["ALLOW_QUERY_API_KEY"] is True  # the embedded default


def test_proxy_header_hsts_and_query_keys_come_from_the_environment(
    tmp_path: object,
) -> None:
    got = security(
        tmp_path,
        PRODUCTION="true",
        SECRET_KEY="s" * 50,
        SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO,https",
        SECURE_HSTS_SECONDS="31536000",
        SECURE_HSTS_INCLUDE_SUBDOMAINS="true",
        SECURE_HSTS_PRELOAD="true",
        ALLOW_QUERY_API_KEY="true",
    )
    assert got["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert got["SECURE_HSTS_SECONDS"] == 31536000
    assert got["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is got["SECURE_HSTS_PRELOAD"] is True
    assert got["ALLOW_QUERY_API_KEY"] is True


def test_the_secret_key_file_is_created_0600_without_a_chmod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No moment in which the new file has the umask's wider mode."""
    from veena_site.conf.secret_key import embedded_secret_key

    def no_chmod(*args: object, **kwargs: object) -> None:
        raise AssertionError("the mode must be right from the start")

    monkeypatch.setattr(Path, "chmod", no_chmod)
    monkeypatch.setattr(os, "chmod", no_chmod)
    old_umask = os.umask(0o022)
    try:
        key = embedded_secret_key(tmp_path)
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600
    assert embedded_secret_key(tmp_path) == key and len(key) >= 50


def test_production_mode_requires_secret_key(tmp_path: object) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=child_env(
            DJANGO_SETTINGS_MODULE="veena_site.settings",
            DATA_DIR=str(tmp_path),
            PRODUCTION="true",
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "SECRET_KEY is required" in proc.stderr


@pytest.mark.redis
@pytest.mark.postgres
def test_postgres_and_redis_when_set(
    tmp_path: object, redis_url: str, postgres_url: str
) -> None:
    got = probe(tmp_path, REDIS_URL=redis_url, DATABASE_URL=postgres_url)
    assert got == {
        "db": "django.db.backends.postgresql",
        "layer": "gateway.layers.process_layer.ProcessChannelLayer",
        "broker": redis_url,
        "eager": False,
    }


@pytest.mark.postgres
def test_migrations_apply_on_postgres(tmp_path: object, postgres_url: str) -> None:
    """Every migration runs on a fresh PostgreSQL database, and the system checks pass."""
    name = f"veena_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = postgres_url.rsplit("/", 1)[0] + "/" + name
    env = child_env(
        DJANGO_SETTINGS_MODULE="veena_site.settings",
        DATA_DIR=str(tmp_path),
        DATABASE_URL=url,
    )
    try:
        for args in (["migrate", "--noinput"], ["check"]):
            subprocess.run(
                [sys.executable, "manage.py", *args],
                env=env,
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


WORKER_CAPACITY_PROBE = (
    "import asyncio, django, json; django.setup(); "
    "from channels.layers import get_channel_layer; "
    "layer = get_channel_layer(); "
    "names = [asyncio.run(layer.new_channel(p)) for p in ('worker.', 'specific.')]; "
    "print(json.dumps([layer.get_capacity(n) for n in names]))"
)


@pytest.mark.parametrize(
    "backend", ["memory", pytest.param("redis", marks=pytest.mark.redis)]
)
def test_a_workers_own_channel_has_room_for_every_slot(
    tmp_path: object, backend: str, request: pytest.FixtureRequest
) -> None:
    """A worker's own channel takes its running jobs' acks, keepalives and audio: it filled
    at ~40 concurrent jobs with a reply channel's capacity (100)."""
    env = {
        "TTS_WORKER_SLOTS": "40",
        "ASR_WORKER_SLOTS": "16",
        "CHANNEL_CAPACITY": "100",
    }
    if backend == "redis":
        env["REDIS_URL"] = request.getfixturevalue("redis_url")
    got = probe(tmp_path, WORKER_CAPACITY_PROBE, **env)
    assert got == [16 * (40 + 16), 100]


OVERRIDE_PROBE = (
    "import django, json; django.setup(); from django.conf import settings as s; "
    "from django.core.checks import run_checks; "
    "print(json.dumps({'ASR_CHUNK_S': s.ASR_CHUNK_S, 'ASR_AGREE_S': s.ASR_AGREE_S, "
    "'checks': sorted(m.id for m in run_checks() if m.id.startswith('veena.'))}))"
)


@pytest.mark.parametrize(
    ("module", "chunk_s", "checks"),
    [
        ("veena_site.settings", 0.6, ["veena.W001", "veena.W002"]),
        ("tests.settings", 1.5, ["veena.W001"]),
        ("bench.support.settings", 1.5, ["veena.W001"]),
    ],
)
def test_constants_come_from_overrides_in_tests_and_benches_only(
    tmp_path: object, module: str, chunk_s: float, checks: list[str]
) -> None:
    """Production reads no constant from the environment and says which it ignored; the
    test and bench settings apply SETTINGS_OVERRIDES (docs/settings.md)."""
    raw = {"SETTINGS_OVERRIDES": '{"ASR_CHUNK_S": 1.5}', "ASR_AGREE_S": "9"}
    got = probe(tmp_path, OVERRIDE_PROBE, module=module, raw=raw)
    assert got == {"ASR_CHUNK_S": chunk_s, "ASR_AGREE_S": 0.6, "checks": checks}
