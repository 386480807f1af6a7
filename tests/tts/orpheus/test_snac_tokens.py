"""The SNAC frame parser (engines §5.3, tts AU7) on scripted and generated token streams.

Each public decoder bug of engines §5.5 that lives in token parsing is a regression case here;
the decode-window rows are in test_snac_window.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.tts.worker.snac_support import random_frames
from tts.orpheus.snac_tokens import (
    AUDIO_BASE,
    AUDIO_LAST,
    CODEBOOK_SIZE,
    END_OF_AI,
    END_OF_SPEECH,
    FRAME_TOKENS,
    Frame,
    FrameParser,
    ParserCounters,
    audio_id,
    frame_ids,
)


def tokens_of(frames: list[Frame]) -> list[int]:
    return [t for frame in frames for t in frame_ids(frame)]


def parse(tokens: list[int], deltas: int = 1) -> tuple[list[Frame], ParserCounters]:
    """Feed ``tokens`` in ``deltas`` pieces (as DELTA outputs arrive), then end the segment."""
    parser = FrameParser()
    out: list[Frame] = []
    step = max(1, len(tokens) // deltas)
    for i in range(0, len(tokens), step):
        out += parser.feed(tokens[i : i + step])
    parser.finish()
    return out, parser.counters


def balanced(c: ParserCounters) -> bool:
    return c.tokens == FRAME_TOKENS * c.frames + c.ignored + c.discarded + c.stops


@pytest.mark.parametrize("n", [1, 2, 3, 12, 117])
def test_tts_au7_n_frames_in_n_frames_out_first_and_last_included(n: int) -> None:
    # engines §5.5 canopyai/Orpheus-TTS: frame 0 and the last two never played.
    frames = random_frames(n, seed=n)
    out, c = parse(tokens_of(frames) + [END_OF_SPEECH], deltas=5)
    assert out == frames
    assert (c.frames, c.frames_dropped, c.discarded, c.stops) == (n, 0, 0, 1)
    assert balanced(c)


@pytest.mark.parametrize("tail", range(1, FRAME_TOKENS))
def test_tts_au7_trailing_partial_frame_is_discarded(tail: int) -> None:
    # engines §5.5 basetenlabs: a tail window misaligned when the count is not a multiple of 7.
    frames = random_frames(13, seed=tail)
    tokens = tokens_of(frames)[: 12 * FRAME_TOKENS + tail]
    out, c = parse(tokens, deltas=3)
    assert out == frames[:12]
    assert (c.frames, c.discarded, c.frames_dropped) == (12, tail, 0)
    assert balanced(c)


def test_tts_au7_code_zero_is_a_valid_code() -> None:
    # engines §5.5 "if token > 0": drops code 0 and shifts the slot counter.
    zero: Frame = (0, 0, 0, 0, 0, 0, 0)
    frames = [zero, random_frames(1)[0], zero, (0, 4095, 0, 4095, 0, 4095, 0)]
    out, c = parse(tokens_of(frames))
    assert out == frames
    assert c.frames_dropped == 0 and c.ignored == 0


def test_tts_au7_code_4096_cannot_exist_it_is_the_next_slot() -> None:
    # engines §5.5 range check "> 4096": lets the invalid code 4096 through.
    frames = random_frames(3)
    tokens = tokens_of(frames)
    tokens[FRAME_TOKENS] = (
        AUDIO_BASE + CODEBOOK_SIZE
    )  # "slot 0, code 4096" is slot 1, code 0
    out, c = parse(tokens)
    assert out == [frames[0], frames[2]]
    assert (
        c.frames_dropped == 0
    )  # the frame never started: its slot-0 id was not a slot-0 id
    assert all(0 <= code < CODEBOOK_SIZE for frame in out for code in frame)


def test_tts_au7_ids_beyond_the_audio_range_are_ignored() -> None:
    frames = random_frames(2)
    tokens = tokens_of(frames)
    tokens[3:3] = [AUDIO_LAST + 1, AUDIO_BASE - 1, 5, 128_000]
    out, c = parse(tokens)
    assert out == frames and c.ignored == 4


def test_tts_au7_one_wrong_slot_token_loses_exactly_one_frame() -> None:
    # engines §5.5 Veena card code: clamps stray codes instead of dropping the frame.
    frames = random_frames(12)
    tokens = tokens_of(frames)
    tokens[5 * FRAME_TOKENS + 3] = audio_id(5, 17)
    out, c = parse(tokens)
    assert out == frames[:5] + frames[6:]
    assert c.frames_dropped == 1
    assert balanced(c)


def test_tts_au7_stop_ends_the_segment_and_later_ids_are_not_read() -> None:
    frames = random_frames(3)
    tokens = tokens_of(frames[:2]) + frame_ids(frames[2])[:4] + [END_OF_AI]
    parser = FrameParser()
    out = parser.feed(tokens + tokens_of(frames))
    assert out == frames[:2] and parser.finished
    assert parser.feed(tokens_of(frames)) == []
    c = parser.counters
    assert (c.tokens, c.discarded, c.stops) == (len(tokens), 4, 1)


# Property: a token stream with injected faults.
FAULTS = st.lists(
    st.tuples(
        st.sampled_from(["non_audio", "replace_wrong_slot", "insert_audio"]),
        st.integers(min_value=0, max_value=10**6),
        st.integers(min_value=0, max_value=FRAME_TOKENS - 1),
        st.integers(min_value=0, max_value=CODEBOOK_SIZE - 1),
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=40),
    seed=st.integers(min_value=0, max_value=2**16),
    faults=FAULTS,
    cut=st.integers(min_value=0, max_value=FRAME_TOKENS * 41),
    deltas=st.integers(min_value=1, max_value=9),
)
def test_tts_au7_faulty_streams_lose_only_the_damaged_frames(
    n: int, seed: int, faults: list[tuple[str, int, int, int]], cut: int, deltas: int
) -> None:
    frames = random_frames(n, seed)
    tokens: list[int | None] = list(tokens_of(frames))
    # Insertions land in gaps (before token i); at most one per gap.
    inserted: dict[int, int] = {}
    damaged: set[int] = set()
    audio_faults = 0
    for kind, where, slot, code in faults:
        if not tokens:
            break
        i = where % len(tokens)
        if kind == "replace_wrong_slot":
            wrong = (i % FRAME_TOKENS + 1 + slot % (FRAME_TOKENS - 1)) % FRAME_TOKENS
            tokens[i] = audio_id(wrong, code)
            damaged.add(i // FRAME_TOKENS)
            audio_faults += 1
        elif i not in inserted:
            if kind == "non_audio":
                inserted[i] = (code * 31) % 128_000  # below every control id
            else:
                inserted[i] = audio_id(slot, code)
                audio_faults += 1
                if i % FRAME_TOKENS:
                    damaged.add(i // FRAME_TOKENS)
    stream: list[int] = []
    for i, token in enumerate(tokens):
        if i in inserted:
            stream.append(inserted[i])
        assert token is not None
        stream.append(token)
    kept_tokens = min(cut, len(tokens))
    stream = stream[: kept_tokens + sum(1 for i in inserted if i < kept_tokens)]
    complete = kept_tokens // FRAME_TOKENS

    out, c = parse(stream, deltas)

    assert balanced(c)
    assert len(out) <= complete
    undamaged = [f for k, f in enumerate(frames[:complete]) if k not in damaged]
    it = iter(out)
    assert all(any(f == o for o in it) for f in undamaged), "a good frame went missing"
    if not audio_faults:
        assert out == frames[:complete]
        assert c.frames_dropped == 0
