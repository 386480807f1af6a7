"""Speaker resolution (specs/tts-ws.md §8): voice ids and alias tables per engine."""

from __future__ import annotations

import re

REFERENCE_NAMES = ("male1", "kavya", "agastya", "maitri", "vinaya")
ENGINE_ALIASES: dict[str, dict[str, str]] = {
    "piper": {name: "joe" for name in REFERENCE_NAMES} | {"en_us-joe-medium": "joe"},
    "fake": {name: "tone" for name in REFERENCE_NAMES},
}


class UnknownSpeaker(Exception):
    """The requested speaker is neither a voice id nor an alias."""

    def __init__(self, name: str, valid: list[str]) -> None:
        super().__init__(name)
        self.name, self.valid = name, valid


def accepted_names(engine: str, voices: tuple[str, ...]) -> list[str]:
    """Every name the engine accepts (ids and aliases), sorted."""
    return sorted(set(voices) | set(ENGINE_ALIASES.get(engine, {})))


def resolve_speaker(name: str, *, engine: str, voices: tuple[str, ...]) -> str:
    """Map a requested speaker to a voice id of ``engine``; raise UnknownSpeaker."""
    key = name.strip().lower()
    unwrapped = re.fullmatch(r"<spk_(.+)>", key)
    key = unwrapped.group(1) if unwrapped else key
    if key in voices:
        return key
    target = ENGINE_ALIASES.get(engine, {}).get(key)
    if target in voices:
        return target
    raise UnknownSpeaker(name, accepted_names(engine, voices))
