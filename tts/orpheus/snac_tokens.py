"""The Orpheus/Veena SNAC token layout and the frame parser (docs/specs/engines.md §5.1, §5.3).

Pure code. A frame is 7 audio ids; the slot of an id (0…6) is read from the id itself, so a code
outside 0…4095 cannot exist and code 0 is an ordinary code. A token of the wrong slot drops the
frame being assembled (only that one) and parsing resyncs on the next slot-0 id; ids outside the
audio range are ignored; whatever is left of a frame at the end is discarded. Every id is counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# Control tokens of the Orpheus/Veena vocabulary (engines §5.1).
BEGIN_OF_TEXT = 128_000
END_OF_TURN = 128_009
START_OF_SPEECH = 128_257
END_OF_SPEECH = 128_258
START_OF_HUMAN = 128_259
END_OF_HUMAN = 128_260
START_OF_AI = 128_261
END_OF_AI = 128_262

AUDIO_BASE = 128_266  # <custom_token_10>: slot 0, code 0
CODEBOOK_SIZE = 4096
FRAME_TOKENS = 7
AUDIO_LAST = AUDIO_BASE + FRAME_TOKENS * CODEBOOK_SIZE - 1  # 156937
VOCAB_MIN = AUDIO_LAST + 1  # a checkpoint's vocabulary must cover the audio range

SNAC_RATE = 24_000  # the SNAC codec's output rate, Hz

# SNAC level of each slot: level 0 = [c0], 1 = [c1, c4], 2 = [c2, c3, c5, c6].
SLOT_LEVELS = (0, 1, 2, 2, 1, 2, 2)

Frame = tuple[int, int, int, int, int, int, int]


def audio_id(slot: int, code: int) -> int:
    """The token id of ``code`` in ``slot``."""
    assert 0 <= slot < FRAME_TOKENS and 0 <= code < CODEBOOK_SIZE
    return AUDIO_BASE + slot * CODEBOOK_SIZE + code


def frame_ids(frame: Iterable[int]) -> list[int]:
    """The 7 token ids of a frame of codes."""
    return [audio_id(slot, code) for slot, code in enumerate(frame)]


@dataclass
class ParserCounters:
    """What a parser saw; ``tokens = 7 × frames + ignored + discarded + stops``."""

    tokens: int = 0  # ids consumed, the stop id included
    frames: int = 0  # complete frames emitted
    frames_dropped: int = 0  # frames lost to a token of the wrong slot
    ignored: int = 0  # ids outside the audio range (not a stop id)
    discarded: int = (
        0  # audio ids that ended in no frame (dropped frames, the EOS tail)
    )
    stops: int = 0  # 1 once a stop id was seen


class FrameParser:
    """Token ids in, complete frames out, for one segment (engines §5.3)."""

    def __init__(self, stop_ids: Iterable[int] = (END_OF_SPEECH, END_OF_AI)) -> None:
        self.stop_ids = frozenset(stop_ids)
        self.counters = ParserCounters()
        self._partial: list[int] = []
        self.finished = False

    def feed(self, token_ids: Iterable[int]) -> list[Frame]:
        """Parse more ids; ids after a stop id or ``finish`` are not consumed."""
        frames: list[Frame] = []
        c = self.counters
        for token in token_ids:
            if self.finished:
                break
            c.tokens += 1
            if token in self.stop_ids:
                c.stops = 1
                self.finish()
                break
            if not AUDIO_BASE <= token <= AUDIO_LAST:
                c.ignored += 1
                continue
            slot, code = divmod(token - AUDIO_BASE, CODEBOOK_SIZE)
            if slot == len(self._partial):
                self._partial.append(code)
                if len(self._partial) == FRAME_TOKENS:
                    frames.append(tuple(self._partial))  # type: ignore[arg-type]
                    c.frames += 1
                    self._partial = []
                continue
            # Out of order: this frame is lost; a slot-0 id starts the next one.
            if self._partial:
                c.frames_dropped += 1
            c.discarded += len(self._partial)
            self._partial = [code] if slot == 0 else []
            if slot != 0:
                c.discarded += 1
        return frames

    def finish(self) -> None:
        """End of the segment: a partial frame is discarded (idempotent)."""
        self.counters.discarded += len(self._partial)
        self._partial = []
        self.finished = True
