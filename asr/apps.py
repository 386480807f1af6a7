"""App config for realtime speech-to-text."""

from django.apps import AppConfig


class AsrConfig(AppConfig):
    """The `/v1/realtime` socket."""

    name = "asr"
    verbose_name = "Realtime speech to text"
