"""App config for streaming TTS."""

from django.apps import AppConfig


class TtsConfig(AppConfig):
    """The `/v1/tts/ws` socket and the TTS REST endpoints."""

    name = "tts"
    verbose_name = "Text to speech"
