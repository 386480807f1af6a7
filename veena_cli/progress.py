"""A one-line progress bar on stderr: drawn on a terminal, or when forced, else silent.

Results never go through it: they are written to stdout with ``above()``, which lifts the bar
off the line first, so a terminal that shows both gets whole lines, and a redirected stdout
gets only the results (issue 37).
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO

REDRAW_S = 0.1


def duration(seconds: float) -> str:
    """``1:02:03`` or ``2:03`` for a number of seconds."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressBar:
    """Draws ``label [####    ] 42% detail`` in place; ``note()`` prints a line above it."""

    def __init__(
        self, label: str, *, enabled: bool | None = None, stream: TextIO | None = None
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.label = label
        self.started = time.monotonic()
        self._drawn = 0.0
        self._line = ""

    def update(
        self, fraction: float | None, detail: str, *, force: bool = False
    ) -> None:
        """Redraw with ``fraction`` done (None: unknown) and ``detail`` (at most 10/s)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._drawn < REDRAW_S:
            return
        self._drawn = now
        width = shutil.get_terminal_size((80, 24)).columns
        elapsed = duration(now - self.started)
        tail = f" {detail}  {elapsed}"
        if fraction is None:
            line = f"{self.label}{tail}"
        else:
            fraction = min(1.0, max(0.0, fraction))
            bar_width = max(10, min(30, width - len(self.label) - len(tail) - 10))
            filled = int(round(fraction * bar_width))
            bar = "#" * filled + "-" * (bar_width - filled)
            line = f"{self.label} [{bar}] {fraction * 100:3.0f}%{tail}"
        self._line = line[: width - 1]
        self.stream.write("\r\x1b[2K" + self._line)
        self.stream.flush()

    def note(self, text: str) -> None:
        """Print a status line on stderr (above the bar when one is drawn)."""
        self.above(text, self.stream)

    def above(self, text: str, stream: TextIO) -> None:
        """Print ``text`` as one line of ``stream`` (stdout for results) above the bar."""
        drawn = self.enabled and bool(self._line)
        if drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
        stream.write(text + "\n")
        stream.flush()
        if drawn:
            self.stream.write(self._line)
            self.stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.enabled and self._line:
            self.stream.write("\n")
            self.stream.flush()
            self._line = ""
