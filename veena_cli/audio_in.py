"""Decode an audio file (WAV, MP3, FLAC, OGG, M4A: whatever FFmpeg reads) to mono PCM16.

PyAV decodes and its resampler (FFmpeg's swresample, stateful across frames) converts to the
rate the realtime session is told, so the whole file is never held in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np
import numpy.typing as npt

from veena_cli.errors import EXIT_INPUT, CliError

Pcm = npt.NDArray[np.int16]


class AudioSource:
    """One input file: its duration (when the container knows it) and its PCM blocks."""

    def __init__(self, path: Path, rate: int) -> None:
        self.path, self.rate = path, rate
        try:
            self._container = av.open(str(path))
        except FileNotFoundError:
            raise CliError(f"no such file: {path}", EXIT_INPUT) from None
        except (av.FFmpegError, OSError) as exc:
            raise CliError(
                f"cannot read {path}: {type(exc).__name__}", EXIT_INPUT
            ) from None
        if not self._container.streams.audio:
            self._container.close()
            raise CliError(f"{path} has no audio stream", EXIT_INPUT)
        self._stream = self._container.streams.audio[0]
        # Read while the container is open: blocks() closes it at the end of the file,
        # and the progress line still asks for the duration after that.
        self.seconds = self._header_seconds()

    def _header_seconds(self) -> float | None:
        """The duration from the container's header, if it has one."""
        if self._stream.duration is not None and self._stream.time_base is not None:
            return float(self._stream.duration * self._stream.time_base)
        if self._container.duration is not None:
            return float(self._container.duration / 1_000_000)
        return None

    def blocks(self) -> Iterator[Pcm]:
        """Mono int16 blocks at ``rate``, in order, until the end of the file."""
        resampler = av.AudioResampler(format="s16", layout="mono", rate=self.rate)
        try:
            for frame in self._container.decode(self._stream):
                for out in resampler.resample(frame):
                    yield out.to_ndarray().reshape(-1).astype(np.int16, copy=False)
            for out in resampler.resample(None):
                yield out.to_ndarray().reshape(-1).astype(np.int16, copy=False)
        except av.FFmpegError as exc:
            raise CliError(
                f"cannot decode {self.path}: {type(exc).__name__}", EXIT_INPUT
            ) from None
        finally:
            self._container.close()
