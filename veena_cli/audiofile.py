"""An output file written as audio arrives, with commit points to roll back to.

``wav`` files start with a 44-byte PCM16 header whose sizes are placeholders (``0xFFFFFFFF``,
as the server's streaming header: readers then take every frame) and are fixed by
``finish()``. ``pcm`` (s16le) and ``mulaw`` (G.711) files are the raw samples.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import BinaryIO, Literal

Container = Literal["wav", "pcm", "mulaw"]
WAV_HEADER_BYTES = 44
UNKNOWN_SIZE = 0xFFFFFFFF
BYTES_PER_SAMPLE = {"wav": 2, "pcm": 2, "mulaw": 1}


def wav_header(sample_rate: int, data_bytes: int | None) -> bytes:
    """The canonical 44-byte mono PCM16 header; ``None`` sizes are placeholders."""
    riff = UNKNOWN_SIZE if data_bytes is None else 36 + data_bytes
    data = UNKNOWN_SIZE if data_bytes is None else data_bytes
    return (
        b"RIFF"
        + struct.pack("<I", riff)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16)
        + b"data"
        + struct.pack("<I", data)
    )


class AudioFile:
    """Append audio; ``commit()`` marks a point that ``rollback()`` returns to."""

    def __init__(self, path: Path, container: Container, sample_rate: int) -> None:
        self.path, self.container, self.sample_rate = path, container, sample_rate
        self.offset = WAV_HEADER_BYTES if container == "wav" else 0
        self._file: BinaryIO | None = None
        self.committed = 0  # data bytes up to the last commit
        self.written = 0  # data bytes written, committed or not

    def open(self, resume_bytes: int = 0) -> None:
        """Create the file, or reopen it keeping its first ``resume_bytes`` of data."""
        exists = resume_bytes and self.path.exists()
        self._file = open(self.path, "r+b" if exists else "w+b")  # noqa: SIM115
        if not exists:
            resume_bytes = 0
            if self.container == "wav":
                self._file.write(wav_header(self.sample_rate, None))
        self.committed = self.written = resume_bytes
        self._file.truncate(self.offset + resume_bytes)
        self._file.seek(self.offset + resume_bytes)

    def write(self, data: bytes) -> None:
        """Append ``data`` after the last byte written."""
        assert self._file is not None
        self._file.write(data)
        self.written += len(data)

    def commit(self) -> None:
        """Make everything written so far durable and the new rollback point."""
        assert self._file is not None
        self._file.flush()
        os.fsync(self._file.fileno())
        self.committed = self.written

    def rollback(self) -> None:
        """Discard what was written since the last commit."""
        assert self._file is not None
        self._file.truncate(self.offset + self.committed)
        self._file.seek(self.offset + self.committed)
        self.written = self.committed

    def finish(self) -> None:
        """Fix the WAV sizes (if any) and close the file."""
        assert self._file is not None
        if self.container == "wav":
            self._file.seek(0)
            self._file.write(wav_header(self.sample_rate, self.committed))
        self.close()

    def close(self) -> None:
        """Close without finishing (the file stays resumable)."""
        if self._file is not None:
            self._file.flush()
            self._file.close()
            self._file = None

    @property
    def seconds(self) -> float:
        """Audio written so far, in seconds."""
        return self.written / BYTES_PER_SAMPLE[self.container] / self.sample_rate
