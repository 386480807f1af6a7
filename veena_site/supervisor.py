"""The distributed ``serve``'s children: started, watched, restarted with backoff, stopped.

A child that exits is started again after a backoff (1 s, doubling to 30 s; back to 1 s once a
child has run for ``STABLE_S``), so one crash does not take the deployment down. A child that
keeps failing right after its start (``QUICK_EXIT_S``) ``GIVE_UP_AFTER`` times in a row is a
configuration error, not an outage: the supervisor then stops every child and fails, so an
outer supervisor (systemd, k8s) sees it. The children ride out a Redis outage by themselves
(``gateway.layers.listener``, redis-py reconnecting, Celery's broker retries); restarts are the
backstop for anything else.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import time
from dataclasses import dataclass

logger = logging.getLogger(__name__)

RESTART_FIRST_S = 1.0
RESTART_MAX_S = 30.0
STABLE_S = 60.0
QUICK_EXIT_S = 10.0
GIVE_UP_AFTER = 5
POLL_S = 0.2


@dataclass
class Child:
    """One command line and its current process."""

    command: list[str]
    name: str
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    quick_exits: int = 0
    restarts: int = 0
    restart_at: float | None = None
    backoff_s: float = 0.0

    def start(self) -> None:
        self.proc = subprocess.Popen(self.command)
        self.started_at = time.monotonic()
        self.restart_at = None

    def exited(self) -> int | None:
        """The exit status once the process has ended and no restart is scheduled."""
        if self.proc is None or self.restart_at is not None:
            return None
        return self.proc.poll()


class Supervisor:
    """Runs the children until a signal, restarting those that exit."""

    def __init__(self, commands: list[list[str]]) -> None:
        self.children = [
            Child(cmd, " ".join(cmd[2:4]), backoff_s=RESTART_FIRST_S)
            for cmd in commands
        ]
        self.stopping = False

    def run(self) -> int:
        """Serve until ``stopping`` is set (0) or a child cannot start (1)."""
        for child in self.children:
            child.start()
        logger.info("distributed topology: %d processes started", len(self.children))
        status = 0
        while not self.stopping:
            if not all(self._watch(child) for child in self.children):
                status = 1
                break
            time.sleep(POLL_S)
        return status

    def stop_on_signals(self) -> None:
        """SIGINT and SIGTERM end ``run`` (call from the main thread)."""
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.stopping = True

    def _watch(self, child: Child) -> bool:
        """Schedule or perform a restart; False when the child should not be restarted."""
        now = time.monotonic()
        if child.restart_at is not None:
            if now >= child.restart_at:
                child.restarts += 1
                logger.warning("restarting %s (restart %d)", child.name, child.restarts)
                child.start()
            return True
        code = child.exited()
        if code is None:
            return True
        ran = now - child.started_at
        if ran >= STABLE_S:
            child.backoff_s = RESTART_FIRST_S
        child.quick_exits = child.quick_exits + 1 if ran < QUICK_EXIT_S else 0
        if child.quick_exits >= GIVE_UP_AFTER:
            logger.error(
                "%s exited with %s %d times within %gs of starting; stopping all",
                child.name,
                code,
                child.quick_exits,
                QUICK_EXIT_S,
            )
            return False
        logger.error(
            "%s exited with %s after %.0fs; restarting in %gs",
            child.name,
            code,
            ran,
            child.backoff_s,
        )
        child.restart_at = now + child.backoff_s
        child.backoff_s = min(child.backoff_s * 2, RESTART_MAX_S)
        return True

    def stop(self, grace_s: float) -> None:
        """SIGTERM every child, then SIGKILL what is left after ``grace_s``."""
        procs = [c.proc for c in self.children if c.proc is not None]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
