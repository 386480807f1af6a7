"""Registry of ASR engines; heavy modules are imported only by the loader that needs them."""

from __future__ import annotations

from collections.abc import Callable

from asr.worker.engines.base import AsrEngine


def load_faster_whisper() -> AsrEngine:
    """Load faster-whisper with the bundled Whisper tiny.en weights (CPU)."""
    from asr.worker.engines.faster_whisper import FasterWhisperAsr

    return FasterWhisperAsr.load()


def load_vllm() -> AsrEngine:
    """Start Whisper on vLLM (``ASR_VLLM_MODEL``, or the bundled tiny.en converted)."""
    from asr.worker.engines.vllm import VllmWhisperAsr

    return VllmWhisperAsr.load()


def load_fake() -> AsrEngine:
    """Build the deterministic test engine."""
    from asr.worker.engines.fake import FakeAsr

    return FakeAsr()


ENGINES: dict[str, Callable[[], AsrEngine]] = {
    "faster_whisper": load_faster_whisper,
    "vllm": load_vllm,
    "fake": load_fake,
}


def check_engine(name: str) -> None:
    """Raise ``EngineLoadError`` when engine ``name`` is configured so it cannot start.

    Cheap checks only (settings and paths), run at process start by ``veena_site.preflight``.
    """
    if name == "vllm":
        from asr.worker.engines.vllm_config import check_model_setting

        check_model_setting()
