"""Gateway session state without sockets: trimming, turns, forwarding, ordering (§6–§8, §13)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from asr.config import SessionConfig, TurnDetection
from asr.front_end import FrontEnd
from asr.messages import AsrFinal
from asr.outputs import (
    Committed,
    Completed,
    Delta,
    Drop,
    Forward,
    OpenItem,
    Overflow,
    SpeechStarted,
    SpeechStopped,
    WorkerCommit,
)
from asr.protocol import RealtimeProtocolError, parse_client_event
from asr.session import (
    MAX_FORWARD,
    MIN_FORWARD,
    Dialect,
    RealtimeSession,
)
from asr.vad import FRAME

SPEECH, QUIET = 0.9, 0.02


class Live:
    """A session beside its front end, as the handlers drive them (commit, clear)."""

    def __init__(self, session: RealtimeSession, front: FrontEnd) -> None:
        self.session, self.front = session, front

    def __getattr__(self, name: str) -> object:
        return getattr(self.session, name)

    @property
    def clock(self) -> int:
        return self.front.clock

    def commit(self) -> list[object]:
        self.front.commit()
        return list(self.session.commit(self.front.clock))

    def clear(self) -> list[object]:
        return list(self.session.clear(self.front.clear()))


def session(trim: bool = True, **kwargs: object) -> Live:
    config = kwargs.pop("config", SessionConfig(model="m"))
    s = RealtimeSession(config=config, **kwargs)  # type: ignore[arg-type]
    return Live(s, FrontEnd(s.config, s.dialect, trim=trim))


def feed(s: Live, frames: int, p: float) -> list[object]:
    """``frames`` VAD frames of audio scored ``p`` (PCM values are irrelevant here)."""
    pcm = np.zeros(FRAME * frames, dtype=np.int16)
    return list(s.ingest(s.front.hear(pcm, [p] * frames, frames * FRAME / 16)))


def kinds(outs: list[object]) -> list[str]:
    return [type(o).__name__ for o in outs]


def test_asr_ai7_nothing_is_forwarded_before_speech_and_padding_is_kept() -> None:
    s = session()
    assert feed(s, 125, QUIET) == []  # 4 s of silence
    assert len(s.current.buf) // 2 < 16000  # trimmed to padding + undecided frames
    outs = feed(s, 40, SPEECH)
    start = 125 * FRAME - 300 * 16
    assert s.current.buf_start == start and s.current.speech
    assert isinstance(outs[0], OpenItem)
    forwards = [o for o in outs if isinstance(o, Forward)]
    assert forwards[0].offset == 0
    assert all(MIN_FORWARD <= len(f.pcm) // 2 <= MAX_FORWARD for f in forwards)


def test_asr_wk4_wk5_each_retained_sample_is_forwarded_once_in_chunks() -> None:
    s = session()
    outs = feed(s, 30, QUIET)
    for _ in range(200):  # 6.4 s of speech in 32 ms appends
        outs += feed(s, 1, SPEECH)
    outs += s.commit()
    forwards = [o for o in outs if isinstance(o, Forward)]
    assert sum(len(f.pcm) for f in forwards) == 2 * forwards[0].item.retained
    offsets = [f.offset for f in forwards]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    assert all(len(f.pcm) // 2 <= MAX_FORWARD for f in forwards)
    assert all(len(f.pcm) // 2 >= MIN_FORWARD for f in forwards[:-1])
    tail = kinds(outs[-3:])
    assert tail == ["Forward", "Committed", "WorkerCommit"] or tail[-2:] == [
        "Committed",
        "WorkerCommit",
    ]
    commit = next(o for o in outs if isinstance(o, WorkerCommit))
    assert commit.total == commit.item.retained


def test_asr_ai8_speechless_item_completes_empty_without_the_worker() -> None:
    s = session()
    feed(s, 100, QUIET)
    outs = s.commit()
    assert kinds(outs) == ["Committed", "Completed"]
    completed = outs[1]
    assert isinstance(completed, Completed) and completed.transcript == ""
    assert completed.item.usage_seconds == round(100 * FRAME / 16000, 3)


def test_asr_vd3_vd5_server_vad_turn_splits_items_at_speech_stop() -> None:
    s = session(config=SessionConfig(model="m", turn_detection=TurnDetection()))
    first_id = s.current.item_id
    feed(s, 50, QUIET)
    outs = feed(s, 60, SPEECH)
    started = next(o for o in outs if isinstance(o, SpeechStarted))
    assert started.item.item_id == first_id
    assert started.ms == (50 * FRAME - 300 * 16) // 16
    outs = feed(s, 30, QUIET)
    stopped = next(o for o in outs if isinstance(o, SpeechStopped))
    # Silence starts at frame 110; 500 ms = 15.6 frames → the stop is at the end of frame 125.
    assert stopped.ms == (126 * FRAME) // 16
    committed = next(o for o in outs if isinstance(o, Committed))
    assert (
        committed.item.item_id == first_id
        and committed.item.commit_point == 126 * FRAME
    )
    assert kinds(outs).index("SpeechStopped") < kinds(outs).index("Committed")
    assert s.current.boundary == 126 * FRAME
    assert s.current.buf_start >= 126 * FRAME and s.clock == 140 * FRAME
    assert committed.item.retained == 126 * FRAME - (50 * FRAME - 300 * 16)


def test_asr_vd6_manual_commit_mid_speech_has_no_speech_stopped() -> None:
    s = session(config=SessionConfig(model="m", turn_detection=TurnDetection()))
    feed(s, 10, QUIET)
    feed(s, 40, SPEECH)
    outs = s.commit()
    assert "SpeechStopped" not in kinds(outs)
    assert not s.front.detector.in_speech
    outs = feed(s, 10, SPEECH)
    assert "SpeechStarted" in kinds(outs)  # a new turn in the next item


def test_asr_it5_events_of_later_items_wait_for_earlier_items() -> None:
    s = session()
    feed(s, 10, QUIET)
    feed(s, 60, SPEECH)
    first = s.commit()[-1].item  # WorkerCommit
    feed(s, 60, QUIET)
    second = s.commit()  # speechless: completed, but held
    assert kinds(second) == ["Committed"]
    feed(s, 60, SPEECH)
    third_item = s.current
    assert s.delta(third_item, "early", None) == []
    assert s.delta(first, "Hello", None) == [Delta(first, "Hello", None)]
    final = AsrFinal(job_id="j", item_seq=first.seq, text=" world.", transcript=None)
    released = s.on_final(final)
    assert kinds(released) == ["Delta", "Completed", "Completed", "Delta"]
    assert released[1].transcript == "Hello world."  # the "deltas" option: joined
    assert released[2].item is not first and released[3].item is third_item
    assert list(s.pending) == []


def test_completed_carries_the_final_transcript_and_word_times_from_the_item_start() -> (
    None
):
    """Issue 34: with the "final" option the worker's transcript is the item's, whatever the
    deltas showed; word times move from the retained audio to the item's start."""
    s = session()
    feed(s, 40, QUIET)  # 1.28 s of silence: retained audio starts 300 ms before speech
    feed(s, 60, SPEECH)
    item = s.commit()[-1].item
    shift = (item.buf_start - item.boundary) / 16000
    assert shift > 0
    s.delta(item, "Hello word", None)
    words = [{"word": "Hello", "start": 0.1, "end": 0.4}]
    final = AsrFinal(
        job_id="j",
        item_seq=item.seq,
        text=".",
        transcript="Hello world.",
        transcript_logprobs=[{"token": "Hello world.", "logprob": -0.1, "bytes": []}],
        words=words,
    )
    delta, completed = s.on_final(final)
    assert isinstance(delta, Delta) and delta.text == "."
    assert isinstance(completed, Completed)
    assert completed.transcript == "Hello world." and item.emitted == "Hello word."
    assert completed.logprobs == final.transcript_logprobs
    assert completed.words == [
        {"word": "Hello", "start": round(0.1 + shift, 3), "end": round(0.4 + shift, 3)}
    ]


def test_a_speechless_item_has_no_words_when_they_were_asked_for() -> None:
    s = session()
    s.session.config = dataclasses.replace(s.config, timestamp_granularities=("word",))
    feed(s, 60, QUIET)
    *_, completed = s.commit()
    assert isinstance(completed, Completed)
    assert (completed.transcript, completed.words) == ("", [])


def test_asr_it14_clear_drops_the_worker_item_and_reserves_a_new_id() -> None:
    s = session()
    feed(s, 10, QUIET)
    feed(s, 20, SPEECH)
    cleared = s.current
    previous_id = s.previous_item_id
    outs = s.clear()
    assert outs == [Drop(cleared)]
    assert s.current.item_id != cleared.item_id
    assert s.current.boundary == s.clock == 30 * FRAME
    assert s.previous_item_id == previous_id
    assert s.find(cleared.seq) is None


def test_asr_ai10_clock_is_continuous_across_commit_and_clear() -> None:
    s = session()
    feed(s, 10, SPEECH)
    s.commit()
    feed(s, 7, QUIET)
    s.clear()
    feed(s, 5, QUIET)
    assert s.clock == 22 * FRAME and s.current.boundary == 17 * FRAME


def test_asr_ai9_overflow_when_retained_audio_passes_the_cap() -> None:
    s = session(max_samples=2 * 16000)
    feed(s, 10, QUIET)
    outs = feed(s, 50, SPEECH)
    assert not any(isinstance(o, Overflow) for o in outs)
    outs = feed(s, 20, SPEECH)
    assert isinstance(outs[-1], Overflow)


def test_asr_vd7_open_microphone_silence_never_grows() -> None:
    s = session(config=SessionConfig(model="m", turn_detection=TurnDetection()))
    for _ in range(300 * 50 // 32):  # 5 min of 32 ms appends... in frames
        assert feed(s, 1, QUIET) == []
    assert len(s.current.buf) // 2 <= 300 * 16 + 5 * FRAME


def test_asr_wk7_replay_resends_unfinished_items_with_their_text() -> None:
    s = session()
    feed(s, 5, QUIET)
    feed(s, 40, SPEECH)
    committed = s.commit()[-1].item
    s.delta(committed, "Hello", None)
    feed(s, 40, SPEECH)
    current = s.current
    outs = s.replay()
    opens = [o for o in outs if isinstance(o, OpenItem)]
    assert [o.item for o in opens] == [committed, current]
    assert committed.emitted == "Hello"
    sent = {
        id(i): sum(len(f.pcm) for f in outs if isinstance(f, Forward) and f.item is i)
        for i in (committed, current)
    }
    assert sent[id(committed)] == 2 * committed.retained
    assert sent[id(current)] == 2 * current.retained
    assert [o.item for o in outs if isinstance(o, WorkerCommit)] == [committed]


def test_asr_wk6_resend_from_what_the_worker_has() -> None:
    s = session()
    feed(s, 60, SPEECH)
    item = s.current
    sent = item.sent
    outs = s.resend(item, 3200)
    assert outs[0].offset == 3200
    assert sum(len(f.pcm) for f in outs) == 2 * (sent - 3200)
    assert item.sent == sent


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"type": "session.update", "session": {}}, Dialect.OPENAI),
        ({"type": "session.update", "model": "x"}, Dialect.VLLM),
        ({"type": "session.update", "model": "x", "session": {}}, Dialect.OPENAI),
        ({"type": "session.update", "event_id": "x"}, None),
        ({"type": "transcription_session.update", "session": {}}, Dialect.OPENAI),
        ({"type": "input_audio_buffer.commit", "final": False}, Dialect.VLLM),
        ({"type": "input_audio_buffer.commit"}, None),
        ({"type": "input_audio_buffer.append", "audio": "AAAAAA=="}, Dialect.OPENAI),
        ({"type": "input_audio_buffer.append", "audio": ""}, None),
        ({"type": "input_audio_buffer.clear"}, None),
    ],
)
def test_asr_di2_di4_dialect_signals(body: dict, expected: Dialect | None) -> None:
    assert parse_client_event(json.dumps(body), None).selects == expected


def test_asr_di2_an_append_that_fails_validation_still_selects_openai() -> None:
    with pytest.raises(RealtimeProtocolError) as exc:
        parse_client_event('{"type": "input_audio_buffer.append", "audio": "!"}', None)
    assert (exc.value.code, exc.value.selects) == ("invalid_audio", Dialect.OPENAI)


def test_asr_vl4_generation_start_reopens_the_item_with_stream() -> None:
    s = session(dialect=Dialect.VLLM)
    assert not s.stream
    feed(s, 40, SPEECH)
    outs = s.start_generation()
    assert outs == [OpenItem(s.current, True)]
    assert s.start_generation() == []
    s.commit()
    assert not s.generating


def test_asr_se8_item_keeps_options_from_its_first_audio() -> None:
    s = session()
    feed(s, 10, SPEECH)
    s.configure(dataclasses.replace(s.config, language="en", prompt="x"))
    assert s.current.options is not None and s.current.options.language is None
    s.commit()
    feed(s, 10, SPEECH)
    assert s.current.options is not None and s.current.options.language == "en"
