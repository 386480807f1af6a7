"""Encoders from the engine's 16-bit mono PCM to OpenAI's ``response_format``s.

``pcm`` is raw s16le; ``mp3`` (LAME), ``opus`` (libopus in Ogg), ``aac`` (FFmpeg's AAC in
ADTS) and ``flac`` are encoded by PyAV (FFmpeg); ``wav`` is a 44-byte header and the PCM.

A length in a header is either true or absent, never a guess (docs/audio-formats.md):

* *streamed* (``whole=False``): bytes leave as the codec makes them, into a sink that cannot
  seek back, so no header can hold the length. The muxers then write none (MP3 gets no
  Xing/Info frame; Ogg and ADTS carry none), and ``wav`` says "unknown" the way streaming
  WAV does (both sizes 0xFFFFFFFF, which libsndfile, FFmpeg and Chromium read to the end).
* *whole* (``whole=True``): the file is made in memory and handed over at ``flush()``,
  after the muxer has gone back to fill in its header: FLAC's STREAMINFO total samples and
  MD5, MP3's Info frame with the encoder delay and padding (so decoders return exactly the
  samples made), WAV's true sizes.

``WHOLE_FORMATS`` are the formats sent whole by default: a FLAC stream whose STREAMINFO says
0 samples ("unknown") is valid, but libsndfile then reports 2**63 - 1 frames and reading it
in one call fails, so FLAC is only ever sent with its length.
"""

from __future__ import annotations

import io
from typing import Literal

import av
import numpy as np

from tts.audio import wav_file_header, wav_stream_header

ResponseFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]
RESPONSE_FORMATS: tuple[ResponseFormat, ...] = (
    "mp3",
    "opus",
    "aac",
    "flac",
    "wav",
    "pcm",
)
WHOLE_FORMATS: frozenset[ResponseFormat] = frozenset({"flac"})
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
    """A write-only file for the muxer: what it wrote since the last ``take()``.

    It has no ``seek``, so FFmpeg treats the output as a pipe and never goes back to write
    a length it did not know when the header left.
    """

    def __init__(self) -> None:
        self.buffer = bytearray()

    def write(self, data: bytes) -> int:
        self.buffer += data
        return len(data)

    def take(self) -> bytes:
        out = bytes(self.buffer)
        self.buffer.clear()
        return out


class _WholeSink(io.BytesIO):
    """A seekable file for the muxer: the header is rewritten at the trailer."""

    def take(self) -> bytes:
        """Nothing leaves before the file is complete."""
        return b""


class StreamEncoder:
    """One response's encoder: ``encode()`` each PCM chunk, then ``flush()`` once."""

    def __init__(self, fmt: ResponseFormat, rate: int, *, whole: bool | None = None):
        self.fmt, self.rate = fmt, rate
        self.whole = fmt in WHOLE_FORMATS if whole is None else whole
        self._started = False
        self._samples = 0
        self._sink: _Sink | _WholeSink = _WholeSink() if self.whole else _Sink()
        self._container: av.container.OutputContainer | None = None
        if fmt in _CODECS:
            self._open_container()

    def _open_container(self) -> None:
        muxer, codec = _CODECS[self.fmt]
        options = _MUXER_OPTIONS.get(self.fmt, {})
        self._container = av.open(self._sink, mode="w", format=muxer, options=options)
        stream = self._container.add_stream(codec, rate=self.rate, layout="mono")
        assert isinstance(stream, av.AudioStream)
        if self.fmt != "flac":
            stream.bit_rate = 64_000
        self._stream = stream
        context = stream.codec_context
        self._resampler = av.AudioResampler(
            format=context.format.name,
            layout="mono",
            rate=self.rate,
            frame_size=context.frame_size or None,
        )

    def encode(self, pcm: bytes) -> bytes:
        """The bytes to send for this chunk of s16le PCM (empty when ``whole``)."""
        head = b""
        if not self._started:
            self._started = True
            if self.fmt == "wav" and not self.whole:
                head = wav_stream_header(self.rate)
        if self._container is None:
            return self._raw(head, pcm)
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

    def _raw(self, head: bytes, pcm: bytes) -> bytes:
        """``wav`` and ``pcm``: the samples as they are (kept back when ``whole``)."""
        if not self.whole:
            return head + pcm
        self._sink.write(pcm)
        return b""

    def flush(self) -> bytes:
        """The rest of the file (all of it when ``whole``); the encoder is done after it."""
        head = self.encode(b"") if not self._started else b""
        if self._container is not None:
            for out in self._resampler.resample(None):
                self._mux(out)
            for packet in self._stream.encode(None):
                self._container.mux(packet)
            self._container.close()
            self._container = None
        if not isinstance(self._sink, _WholeSink):
            return head + self._sink.take()
        body = self._sink.getvalue()
        if self.fmt == "wav":
            body = wav_file_header(self.rate, len(body)) + body
        return body

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
