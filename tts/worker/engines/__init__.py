"""Registry of TTS engines; heavy modules are imported only by the loader that needs them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tts.worker.engines.base import TtsEngine


def load_piper() -> TtsEngine:
    """Load the bundled Piper voice (CPU), its ONNX sessions as configured."""
    from django.conf import settings

    from tts.worker.engines.piper import PiperTts

    return PiperTts.load(
        session_threads=settings.TTS_PIPER_SESSION_THREADS,
        spinning=settings.TTS_PIPER_SPINNING,
        wait_for_cores=settings.TTS_PIPER_WAIT_FOR_CORES,
        share_hold_s=settings.TTS_PIPER_SHARE_HOLD_S,
        return_memory=settings.TTS_PIPER_RETURN_MEMORY,
        release_idle_s=settings.TTS_PIPER_RELEASE_IDLE_S,
        first_clause=settings.TTS_PIPER_FIRST_CLAUSE_PHONEMES,
        first_piece=settings.TTS_PIPER_FIRST_PIECE_FRAMES,
        split_cache=Path(settings.DATA_DIR) / "piper-split",
        side_by_side=settings.TTS_PIPER_SIDE_BY_SIDE,
    )


def load_fake() -> TtsEngine:
    """Build the deterministic test engine."""
    from django.conf import settings

    from tts.worker.engines.fake import FakeTts

    return FakeTts(chunk_delay_s=settings.FAKE_TTS_CHUNK_DELAY_S)


def load_vllm() -> TtsEngine:
    """Load the Veena/Orpheus checkpoint on vLLM and the SNAC decoder (worker only)."""
    from django.conf import settings

    from tts.orpheus.vllm_config import VllmTtsConfig
    from tts.worker.engines.vllm import VllmSnacTts

    return VllmSnacTts.load(VllmTtsConfig.from_settings(settings))


ENGINES: dict[str, Callable[[], TtsEngine]] = {
    "piper": load_piper,
    "vllm": load_vllm,
    "fake": load_fake,
}
