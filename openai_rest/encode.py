"""Streaming encoders from the engine's 16-bit mono PCM to OpenAI's ``response_format``s.

``pcm`` is raw s16le, ``wav`` a 44-byte header with unknown sizes (0xFFFFFFFF, as a stream
has no length) then the PCM; ``mp3`` (LAME), ``opus`` (libopus in Ogg), ``aac`` (FFmpeg's AAC
in ADTS) and ``flac`` are encoded by PyAV (FFmpeg) as the audio arrives, so each chunk's bytes
go out as soon as the codec has a packet.
"""

from __future__ import annotations

from typing import Literal

import av
import numpy as np

from tts.audio import wav_stream_header

ResponseFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]
RESPONSE_FORMATS: tuple[ResponseFormat, ...] = (
    "mp3",
    "opus",
    "aac",
    "flac",
    "wav",
    "pcm",
)
CONTENT_TYPES: dict[ResponseFormat, str] = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}
# response_format → (FFmpeg muxer, encoder)
_CODECS: dict[str, tuple[str, str]] = {
    "mp3": ("mp3", "libmp3lame"),
    "opus": ("ogg", "libopus"),
    "aac": ("adts", "aac"),
    "flac": ("flac", "flac"),
}


# Ogg pages of at most 100 ms (FFmpeg's default is 1 s), so opus streams as it is encoded.
_MUXER_OPTIONS = {"opus": {"page_duration": "100000"}}


class _Sink:
    """A write-only file for the muxer: what it wrote since the last ``take()``."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def write(self, data: bytes) -> int:
        self.buffer += data
        return len(data)

    def take(self) -> bytes:
        out = bytes(self.buffer)
        self.buffer.clear()
        return out


class StreamEncoder:
    """One response's encoder: ``encode()`` each PCM chunk, then ``flush()`` once."""

    def __init__(self, fmt: ResponseFormat, rate: int) -> None:
        self.fmt, self.rate = fmt, rate
        self._started = False
        self._samples = 0
        self._sink = _Sink()
        self._container: av.container.OutputContainer | None = None
        if fmt in _CODECS:
            muxer, codec = _CODECS[fmt]
            self._container = av.open(
                self._sink, mode="w", format=muxer, options=_MUXER_OPTIONS.get(fmt, {})
            )
            stream = self._container.add_stream(codec, rate=rate, layout="mono")
            assert isinstance(stream, av.AudioStream)
            if fmt != "flac":
                stream.bit_rate = 64_000
            self._stream = stream
            context = stream.codec_context
            self._resampler = av.AudioResampler(
                format=context.format.name,
                layout="mono",
                rate=rate,
                frame_size=context.frame_size or None,
            )

    def encode(self, pcm: bytes) -> bytes:
        """The bytes to send for this chunk of s16le PCM (may be empty)."""
        head = b""
        if not self._started:
            self._started = True
            if self.fmt == "wav":
                head = wav_stream_header(self.rate)
        if self._container is None:
            return head + pcm
        samples = np.frombuffer(pcm, dtype="<i2").reshape(1, -1)
        if samples.shape[1] == 0:
            return head
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate = self.rate
        frame.pts = self._samples
        self._samples += samples.shape[1]
        for out in self._resampler.resample(frame):
            self._mux(out)
        return head + self._sink.take()

    def flush(self) -> bytes:
        """The encoder's tail and the container's trailer; the encoder is done after it."""
        head = self.encode(b"") if not self._started else b""
        if self._container is None:
            return head
        for out in self._resampler.resample(None):
            self._mux(out)
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.close()
        self._container = None
        return head + self._sink.take()

    def close(self) -> None:
        """Drop the encoder without a trailer (the response was abandoned)."""
        if self._container is not None:
            try:
                self._container.close()
            except av.FFmpegError:
                pass
            self._container = None

    def _mux(self, frame: av.AudioFrame) -> None:
        for packet in self._stream.encode(frame):
            self._container.mux(packet)  # type: ignore[union-attr]
