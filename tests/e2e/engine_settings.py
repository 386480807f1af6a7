"""Test settings with the real CPU engines (Piper, faster-whisper) for a live test gateway."""

from tests.settings import *  # noqa: F403

TTS_ENGINE = "piper"
ASR_ENGINE = "faster_whisper"
