"""A PostgreSQL cluster of one test, on a free port, to stop and start again (fault tests).

The machine's shared server (``POSTGRES_TEST_URL``) is never stopped: a test that needs a
database outage gets a cluster of its own. ``initdb`` refuses to run as root, so as root the
cluster belongs to the ``postgres`` user and its commands run as it; its folder is then a fresh
one under the system's temporary directory, not under pytest's (``/tmp/pytest-of-root`` is made
private again by every pytest run that starts, other engineers' included, which locked the
``postgres`` user out of a running cluster). ``destroy`` removes that folder.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import IN_CI, free_port

SERVER_USER = "postgres"


def _bin_dir() -> Path | None:
    """The newest installed PostgreSQL's binaries (Debian's layout), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_major)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _major(path: str) -> int:
    return int(Path(path).parts[-3]) if Path(path).parts[-3].isdigit() else 0


class PrivatePostgres:
    """A throwaway cluster in ``directory``: ``start``, ``stop``, ``start`` again, ``destroy``."""

    def __init__(self, directory: Path) -> None:
        bin_dir = _bin_dir()
        if bin_dir is None:
            message = "PostgreSQL's server binaries (initdb, pg_ctl) are not installed"
            pytest.fail(message) if IN_CI else pytest.skip(message)
        self.bin = bin_dir
        self.port = free_port()
        self._as_root = os.geteuid() == 0
        self._own_directory = self._as_root
        if self._own_directory:
            directory = Path(tempfile.mkdtemp(prefix="veena-pg-"))
        self.directory = directory
        self.data = directory / "pgdata"
        self.log = directory / "postgres.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgres://{SERVER_USER}@127.0.0.1:{self.port}/{database}"

    def _run(self, *argv: str, timeout: float = 60) -> None:
        command = [str(self.bin / argv[0]), *argv[1:]]
        if self._as_root:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, (
            f"{argv[0]}: {done.stdout[-1000:]}{done.stderr[-1000:]}"
        )

    def init(self) -> None:
        """Create the cluster (trust authentication on 127.0.0.1 only)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._as_root:
            owner = pwd.getpwnam(SERVER_USER)
            os.chown(self.directory, owner.pw_uid, owner.pw_gid)
        self._run(
            "initdb", "-D", str(self.data), "-U", SERVER_USER, "--auth=trust",
            "--no-sync", "-E", "UTF8",
        )  # fmt: skip

    def start(self) -> None:
        """Start (or start again) on the same port and data; returns once it accepts."""
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''"
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options,
            "-w", "-t", "30", "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` ends every session, as an outage does."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def create_database(self, name: str) -> str:
        """A new database in this cluster; its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def accepting(self) -> bool:
        import psycopg

        try:
            psycopg.connect(self.url(), connect_timeout=1).close()
        except psycopg.Error:
            return False
        return True

    def destroy(self) -> None:
        """Stop at once (immediate) if running; remove the folder of a root-run cluster
        (others go with the test's tmp_path)."""
        if (self.data / "postmaster.pid").exists():
            try:
                self.stop("immediate")
            except AssertionError:
                pass
        if self._own_directory:
            shutil.rmtree(self.directory, ignore_errors=True)


def wait_accepting(pg: PrivatePostgres, limit_s: float = 30) -> float:
    """Seconds until ``pg`` accepts connections (fails past ``limit_s``)."""
    start = time.monotonic()
    while not pg.accepting():
        assert time.monotonic() - start < limit_s, (
            "private PostgreSQL did not come back"
        )
        time.sleep(0.05)
    return time.monotonic() - start
