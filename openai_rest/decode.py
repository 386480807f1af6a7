"""Decode an uploaded audio file (WAV, MP3, FLAC, Ogg/Opus, M4A, WebM: whatever FFmpeg reads)
to 16 kHz mono PCM16 with PyAV, stopping as soon as the file is longer than allowed.

Runs in a thread (it is CPU work); raises ``UnreadableAudio``, ``TruncatedAudio`` or
``AudioTooLong``. A small file may decode to hours (a decompression bomb: silence compresses
to almost nothing), so the length is bounded by what decodes, not by the file's size, and
with bounded work (issue 31):

* a file whose header declares more than ``max_seconds`` is refused before any decoding;
* decoding stops at ``max_seconds`` of output (at most ``max_seconds`` × 32 KB held), and at
  ``max_seconds`` of stereo 48 kHz *input* samples, so an exotic rate or channel count
  cannot make the refusal cost more than a normal file of the longest allowed length.

A file that ends before the length its header declares is truncated, not shorter: a WAV whose
``data`` chunk is cut, or a FLAC with fewer samples than its ``STREAMINFO`` says. (Ogg and MP3
declare no length they must reach; FFmpeg fails on a FLAC cut inside its header.)
"""

from __future__ import annotations

import struct
from typing import IO

import av
import numpy as np
import numpy.typing as npt

from asr.whisper import MODEL_RATE

Pcm16 = npt.NDArray[np.int16]

INPUT_RATE_BUDGET = 48_000 * 2  # input samples a second of the longest allowed file
TRUNCATION_SLACK_S = 0.05  # the last partial block of a well-formed file
EXACT_DURATION = ("flac",)  # demuxers whose duration is a header's sample count
WAV_UNKNOWN_SIZES = (0, 0xFFFFFFFF)  # streamed WAVs: no data size declared


class UnreadableAudio(Exception):
    """The file is no audio FFmpeg can decode (or has no audio stream)."""


class TruncatedAudio(UnreadableAudio):
    """The file ends before the length its header declares."""


class AudioTooLong(Exception):
    """The file's audio is longer than the cap."""


def decode_upload(file: IO[bytes], *, max_seconds: float) -> Pcm16:
    """The whole file as 16 kHz mono int16 samples."""
    if wav_truncated(file):
        raise TruncatedAudio
    try:
        container = av.open(file, mode="r")
    except (av.FFmpegError, OSError, ValueError, EOFError):
        raise UnreadableAudio from None
    try:
        if not container.streams.audio:
            raise UnreadableAudio
        declared = (container.duration or 0) / av.time_base
        if declared > max_seconds:
            raise AudioTooLong
        pcm = _decode(container, container.streams.audio[0], max_seconds)
    except (av.FFmpegError, OSError, ValueError, EOFError):
        raise UnreadableAudio from None
    finally:
        container.close()
    if not len(pcm):
        raise UnreadableAudio
    exact = container.format.name in EXACT_DURATION
    if exact and len(pcm) / MODEL_RATE < declared - TRUNCATION_SLACK_S:
        raise TruncatedAudio
    return pcm


def _decode(
    container: av.container.InputContainer, stream: av.AudioStream, max_seconds: float
) -> Pcm16:
    limit = int(max_seconds * MODEL_RATE)
    budget = max_seconds * INPUT_RATE_BUDGET
    resampler = av.AudioResampler(format="s16", layout="mono", rate=MODEL_RATE)
    blocks: list[Pcm16] = []
    total, taken = 0, 0
    for frame in container.decode(stream):
        taken += frame.samples * max(1, len(frame.layout.channels))
        for out in resampler.resample(frame):
            block = out.to_ndarray().reshape(-1).astype(np.int16, copy=False)
            blocks.append(block)
            total += len(block)
        if total > limit or taken > budget:
            raise AudioTooLong
    for out in resampler.resample(None):
        blocks.append(out.to_ndarray().reshape(-1).astype(np.int16, copy=False))
    pcm = np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int16)
    if len(pcm) > limit:
        raise AudioTooLong
    return pcm


def wav_truncated(file: IO[bytes]) -> bool:
    """True for a RIFF/WAVE file whose ``data`` chunk declares more bytes than follow it."""
    file.seek(0)
    head = file.read(64 * 1024)
    file.seek(0, 2)
    size = file.tell()
    file.seek(0)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return False
    offset = 12
    while offset + 8 <= len(head):
        chunk, length = struct.unpack_from("<4sI", head, offset)
        offset += 8
        if chunk == b"data":
            return length not in WAV_UNKNOWN_SIZES and size - offset < length
        offset += length + (length & 1)
    return False
