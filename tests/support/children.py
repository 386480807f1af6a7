"""Child processes of the cross-process tests, seen from the test: JSON lines on stdout."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT


class Child:
    """``python -m module scenario args`` whose JSON stdout lines are read with a timeout."""

    def __init__(
        self,
        module: str,
        scenario: str,
        args: dict[str, Any],
        env: dict[str, str],
        log: Path,
        *,
        timeout: float,
    ):
        self.log = log
        self.timeout = timeout
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, scenario, json.dumps(args)],
            env=env,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log.open("w"),
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def event(
        self, timeout: float | None = None, *, key: str | None = None
    ) -> dict[str, Any]:
        """The next JSON line (that has ``key``); fails with the child's stderr otherwise."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    break
                continue
            if line.startswith("{"):
                event = json.loads(line)
                if key is None or key in event:
                    return event
        what = "event" if key is None else repr(key)
        pytest.fail(
            f"no {what} from the child; stderr:\n{self.log.read_text()[-3000:]}"
        )

    def until(self, key: str, timeout: float | None = None) -> dict[str, Any]:
        """The next event that has ``key``."""
        return self.event(timeout, key=key)

    def send(self, line: str = "go") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
