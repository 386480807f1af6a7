"""Registry of ASR engines; heavy modules are imported only by the loader that needs them."""

from __future__ import annotations

from collections.abc import Callable

from asr.engines.base import AsrEngine


def load_faster_whisper() -> AsrEngine:
    """Load faster-whisper with the bundled Whisper tiny.en weights (CPU)."""
    from asr.engines.faster_whisper import FasterWhisperAsr

    return FasterWhisperAsr.load()


def load_fake() -> AsrEngine:
    """Build the deterministic test engine."""
    from asr.engines.fake import FakeAsr

    return FakeAsr()


ENGINES: dict[str, Callable[[], AsrEngine]] = {
    "faster_whisper": load_faster_whisper,
    "fake": load_fake,
}
