"""The Veena and Orpheus prompt recipes and the segment token budget (engines §5.2), pure."""

from __future__ import annotations

from tts.orpheus.vllm_prompts import ORPHEUS, VEENA, token_budget


def fake_encode(text: str) -> list[int]:
    return [1000 + ord(c) for c in text]


def test_veena_prompt_wraps_the_speaker_token_and_text() -> None:
    ids = VEENA.prompt_ids(fake_encode, "kavya", "Hi")
    assert ids == [128259, *fake_encode("<spk_kavya> Hi"), 128260, 128261, 128257]
    assert VEENA.stop_ids == (128258, 128262)
    assert VEENA.voice_token("kavya") == "<spk_kavya>"


def test_orpheus_prompt_has_begin_of_text_and_end_of_turn() -> None:
    ids = ORPHEUS.prompt_ids(fake_encode, "tara", "Hi")
    assert ids == [
        128259,
        128000,
        *fake_encode("tara: Hi"),
        128009,
        128260,
        128261,
        128257,
    ]
    assert ORPHEUS.stop_ids == (128258,)
    assert ORPHEUS.voice_token("tara") is None  # the voice is plain text


def test_token_budget_is_the_card_formula_in_whole_frames() -> None:
    assert token_budget("Hello world.") == int(12 * 1.3) * 7 + 21 == 126
    assert token_budget("x" * 200) % 7 == 0
