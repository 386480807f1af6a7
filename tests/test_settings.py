"""Settings: the embedded default with no environment, PostgreSQL + Redis when set."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import psycopg
import pytest

from tests.conftest import ROOT, child_env

PROBE = (
    "import django, json; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'db': s.DATABASES['default']['ENGINE'], "
    "'layer': s.CHANNEL_LAYERS['default']['BACKEND'], 'broker': s.CELERY_BROKER_URL, "
    "'eager': s.CELERY_TASK_ALWAYS_EAGER}))"
)


def probe(tmp_path: object, **env: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=child_env(
            DJANGO_SETTINGS_MODULE="veena_site.settings", DATA_DIR=str(tmp_path), **env
        ),
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
        "layer": "channels.layers.InMemoryChannelLayer",
        "broker": "memory://",
        "eager": True,
    }


def test_secret_key_is_generated_once_and_kept(tmp_path: object) -> None:
    probe(tmp_path)
    first = (tmp_path / "secret_key").read_text()
    probe(tmp_path)
    assert (tmp_path / "secret_key").read_text() == first and len(first) >= 50


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
        "layer": "channels_redis.core.RedisChannelLayer",
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
