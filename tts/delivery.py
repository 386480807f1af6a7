"""What of one TTS request reached the client, and so what it bills (docs/accounting.md).

Pure state (STYLE 6). The consumer counts each frame it hands to the socket and each segment
whose last frame went with it; when the request ends, ``Delivery.billed`` applies the rules:

* a completed request bills every accepted character, less the text the client cleared
  before its audio (C2), and all the audio it was sent;
* any other end (cancelled, failed) bills the characters of the segments whose last frame
  reached the client, and the audio samples that did;
* when the stream ends with the request, bytes still waiting in the gateway's write buffer
  never reached the client: the frames they belong to, and a segment whose last frame is
  among them, are not billed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

# Frames remembered for the unsent-bytes walk: more than the flow-control window
# (TTS_CHUNK_WINDOW chunks) plus TTS_SEND_BUFFER_BYTES of frames could ever hold.
RECENT_FRAMES = 4096


@dataclass(frozen=True)
class Billed:
    """What a TTS request bills: characters, and audio samples at ``sample_rate``."""

    chars: int
    samples: int
    sample_rate: int


@dataclass
class Delivery:
    """Frames and whole segments handed to the socket, in byte offsets of the stream."""

    sample_rate: int
    bytes_sent: int = 0
    samples_sent: int = 0
    chars_sent: int = 0  # characters of segments whose last frame was sent
    cleared_chars: int = 0  # text dropped by the client's clear before its audio (C2)
    # (start byte offset, end byte offset, samples) of the latest frames, oldest first.
    frames: deque[tuple[int, int, int]] = field(
        default_factory=lambda: deque(maxlen=RECENT_FRAMES), repr=False
    )
    # (end byte offset, characters) of each segment whose last frame was sent.
    segments: list[tuple[int, int]] = field(default_factory=list, repr=False)

    def frame(self, nbytes: int, samples: int, *, segment_chars: int = 0) -> None:
        """One frame handed to the socket; ``segment_chars`` when it ends a segment."""
        start = self.bytes_sent
        self.bytes_sent += nbytes
        self.samples_sent += samples
        self.frames.append((start, self.bytes_sent, samples))
        if segment_chars:
            self.chars_sent += segment_chars
            self.segments.append((self.bytes_sent, segment_chars))

    def cleared(self, chars: int) -> None:
        """The client cleared ``chars`` characters before their audio reached it (C2)."""
        self.cleared_chars += chars

    def billed(self, *, completed: bool, accepted_chars: int, unsent: int) -> Billed:
        """The rules of the module docstring; ``unsent``: bytes the client never got."""
        reached = self.bytes_sent - max(0, min(unsent, self.bytes_sent))
        samples = self.samples_sent - self._unsent_samples(reached)
        if completed and reached == self.bytes_sent:
            chars = max(0, accepted_chars - self.cleared_chars)
        else:
            chars = sum(n for end, n in self.segments if end <= reached)
        return Billed(chars=chars, samples=samples, sample_rate=self.sample_rate)

    def _unsent_samples(self, reached: int) -> int:
        """Samples of the frames past byte offset ``reached`` (a cut frame: its unsent
        share, rounded up, so the part billed never exceeds the part delivered)."""
        unsent = 0
        for start, end, samples in reversed(self.frames):
            if end <= reached:
                break
            if start >= reached:
                unsent += samples
            else:
                unsent += -(-samples * (end - reached) // (end - start))
        return min(unsent, self.samples_sent)
