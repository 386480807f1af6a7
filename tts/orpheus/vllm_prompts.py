"""Prompt recipes of the Veena and Orpheus checkpoints (docs/specs/engines.md §5.2), pure code.

A recipe turns (voice, text) into ``prompt_token_ids`` around the checkpoint's own text tokens,
names the stop ids, the voices the checkpoint was trained with (tts S1), their languages and the
S3 alias table, and the per-segment token budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from tts.orpheus.snac_tokens import (
    BEGIN_OF_TEXT,
    END_OF_AI,
    END_OF_HUMAN,
    END_OF_SPEECH,
    END_OF_TURN,
    FRAME_TOKENS,
    START_OF_AI,
    START_OF_HUMAN,
    START_OF_SPEECH,
)

RecipeName = Literal["veena", "orpheus"]
Encode = Callable[[str], list[int]]  # text → ids, without special tokens


@dataclass(frozen=True)
class Recipe:
    """How one checkpoint family is prompted."""

    name: RecipeName
    voices: tuple[str, ...]
    languages: tuple[str, ...]
    aliases: Mapping[str, str] = field(repr=False)  # S3
    stop_ids: tuple[int, ...]
    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    voice_format: str  # how the voice joins the text

    def prompt_ids(self, encode: Encode, voice: str, text: str) -> list[int]:
        """The prompt of one segment."""
        spoken = self.voice_format.format(voice=voice, text=text)
        return [*self.prefix, *encode(spoken), *self.suffix]

    def voice_token(self, voice: str) -> str | None:
        """The tokenizer token that must exist for ``voice`` (Veena), else None."""
        return f"<spk_{voice}>" if self.name == "veena" else None


def token_budget(text: str) -> int:
    """The Veena card's per-segment budget, ``int(len × 1.3) × 7 + 21`` tokens, uncapped.

    The card caps it at 700 (8.5 s); the gateway already cuts text into segments of at most
    TTS_SEGMENT_MAX_CHARS, whose speech can be longer than that.
    """
    return int(len(text) * 1.3) * FRAME_TOKENS + 3 * FRAME_TOKENS


VEENA = Recipe(
    name="veena",
    voices=("agastya", "kavya", "maitri", "vinaya"),
    languages=("hi-IN", "en-IN"),
    aliases={"male1": "agastya"},
    stop_ids=(END_OF_SPEECH, END_OF_AI),
    prefix=(START_OF_HUMAN,),
    suffix=(END_OF_HUMAN, START_OF_AI, START_OF_SPEECH),
    voice_format="<spk_{voice}> {text}",
)
ORPHEUS = Recipe(
    name="orpheus",
    voices=("dan", "jess", "leah", "leo", "mia", "tara", "zac", "zoe"),
    languages=("en-US",),
    aliases={
        "male1": "leo",
        "agastya": "leo",
        "kavya": "tara",
        "maitri": "tara",
        "vinaya": "tara",
    },
    stop_ids=(END_OF_SPEECH,),
    prefix=(START_OF_HUMAN, BEGIN_OF_TEXT),
    suffix=(END_OF_TURN, END_OF_HUMAN, START_OF_AI, START_OF_SPEECH),
    voice_format="{voice}: {text}",
)
RECIPES: dict[str, Recipe] = {"veena": VEENA, "orpheus": ORPHEUS}
