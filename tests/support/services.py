"""Real project processes for the fault tests: gateways, workers, management commands.

Each process runs ``manage.py`` with the environment it is given (``tests.settings`` and the
fake engines unless the caller says otherwise) and logs to a file of its own, which a failing
test prints.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, child_env


def project_env(data_dir: Path, **overrides: object) -> dict[str, str]:
    """A child environment on ``data_dir`` with the test settings (fake engines)."""
    return child_env(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATA_DIR=str(data_dir),
        LOG_LEVEL="INFO",
        **overrides,
    )


def run_manage(*args: str, env: dict[str, str], timeout: float = 120) -> str:
    """Run ``manage.py args`` to completion; its stdout (fails with stderr otherwise)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)}: {done.stderr[-2000:]}"
    return done.stdout


def create_key(env: dict[str, str], account: str = "faults") -> tuple[str, str]:
    """``create_api_key`` in a child process: the key's id and the raw key."""
    lines = run_manage("create_api_key", "--account", account, env=env).splitlines()
    key_id = next(line.split()[-1] for line in lines if line.startswith("Key id:"))
    return key_id, lines[-1].strip()


PLANNED_KEY = """
import json, os
from accounts.models.accounts import Account
from accounts.models.plans import Plan
from accounts.services.api_keys import api_key_create
name, limits = os.environ["KEY_ACCOUNT"], json.loads(os.environ["KEY_LIMITS"])
values = {"requests_per_minute": 1000, "max_concurrent_streams": 50,
          "max_session_seconds": 600, **limits}
plan = Plan.objects.create(name="plan-" + name, **values)
account = Account.objects.create(name=name, slug=name, plan=plan)
_, raw = api_key_create(account=account, name="k", actor=None, actor_label="tests")
print(raw)
"""


def create_planned_key(env: dict[str, str], account: str, **limits: int) -> str:
    """A raw key of a new account on a plan of its own with ``limits`` (``manage.py
    shell`` in a child process)."""
    extra = {"KEY_ACCOUNT": account, "KEY_LIMITS": json.dumps(limits)}
    out = run_manage("shell", "-c", PLANNED_KEY, env={**env, **extra})
    return out.splitlines()[-1].strip()


class Service:
    """One long-running ``manage.py`` child (or the command line ``argv``) with its log."""

    def __init__(
        self,
        name: str,
        args: list[str],
        env: dict[str, str],
        log: Path,
        *,
        argv: list[str] | None = None,
        process_group: int | None = None,
    ):
        self.name, self.log = name, log
        self.proc = subprocess.Popen(
            argv or [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT,
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            process_group=process_group,  # 0: a group of its own; else join that one
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """``kill -9``."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self, timeout: float = 20) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; the exit status."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode

    def tail(self, chars: int = 3000) -> str:
        return (
            f"--- {self.name} log ---\n{self.log.read_text(errors='replace')[-chars:]}"
        )


def start_gateway(
    env: dict[str, str], port: int, log: Path, *, process_group: int | None = None
) -> Service:
    """``manage.py rungateway`` on 127.0.0.1:``port``."""
    args = ["rungateway", "--host", "127.0.0.1", "--port", str(port)]
    return Service("gateway", args, env, log, process_group=process_group)


def start_worker(
    env: dict[str, str], log: Path, *, process_group: int | None = None
) -> Service:
    """``manage.py gpuworker`` (needs ``REDIS_URL`` in ``env``)."""
    return Service("worker", ["gpuworker"], env, log, process_group=process_group)


def start_celery(env: dict[str, str], log: Path) -> Service:
    """The Celery worker exactly as the distributed ``serve`` starts it (no beat)."""
    from veena_site.management.commands.serve import role_commands

    (argv,) = role_commands(["celery"], "127.0.0.1", 0, 0)
    return Service("celery", [], env, log, argv=argv)


def get_json(port: int, path: str, timeout: float = 2) -> tuple[int, Any]:
    """Status and JSON body of ``GET path``; (0, None) when nothing answers."""
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}{path}", timeout=timeout
        ) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return 0, None


def get_text(port: int, path: str, timeout: float = 2) -> str:
    """The body of ``GET path`` (``/metrics``); empty when nothing answers."""
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}{path}", timeout=timeout
        ) as resp:
            return str(resp.read().decode())
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return ""


def wait_ready(port: int, *services: Service, limit_s: float = 60) -> dict[str, Any]:
    """Wait for ``/readyz`` 200; fails with the services' logs if one exits first."""
    deadline = time.monotonic() + limit_s
    body: Any = None
    while time.monotonic() < deadline:
        for service in services:
            assert service.alive(), f"{service.name} exited\n{service.tail()}"
        status, body = get_json(port, "/readyz")
        if status == 200:
            return dict(body)
        time.sleep(0.2)
    logs = "\n".join(s.tail() for s in services)
    raise AssertionError(f"/readyz not 200 within {limit_s} s: {body}\n{logs}")


def gauge(metrics: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` in a Prometheus text page matching ``labels``."""
    total = 0.0
    for line in metrics.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total
