"""``veena transcribe`` items: cut at pauses after the minimum length, never past the window."""

from __future__ import annotations

import numpy as np

from veena_cli.cuts import MAX_ITEM_S, MIN_ITEM_S, choose_cut

RATE = 16000


def tone(seconds: float, level: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (np.sin(2 * np.pi * 220 * t) * level * 32767).astype(np.int16)


def quiet(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), dtype=np.int16)


def test_cut_falls_in_the_first_pause_after_the_minimum() -> None:
    pcm = np.concatenate([tone(2), quiet(0.5), tone(3), quiet(0.6), tone(10)])
    cut = choose_cut(pcm, RATE, final=False)
    assert 5.5 * RATE < cut.length < 6.1 * RATE  # inside the second pause
    assert cut.speech_start == 0 and cut.speech_end <= 5.7 * RATE


def test_speech_without_pauses_is_cut_at_the_window() -> None:
    cut = choose_cut(tone(40), RATE, final=False)
    assert cut.length == int(MAX_ITEM_S * RATE)


def test_the_end_of_the_file_is_one_item_when_it_fits() -> None:
    pcm = np.concatenate([tone(MIN_ITEM_S + 1), quiet(1.0)])
    cut = choose_cut(pcm, RATE, final=True)
    assert cut.length == len(pcm)
    assert cut.speech_end < len(pcm)


def test_silence_has_no_speech() -> None:
    assert not choose_cut(quiet(5), RATE, final=True).has_speech
