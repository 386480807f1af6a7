"""``python manage.py build_tiny_orpheus OUTDIR``: a tiny random Orpheus-layout checkpoint.

For plumbing tests and the CPU benchmark (tts.worker.engines.tiny_orpheus); it produces noise, not speech.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    """Write the tiny Llama, its tokenizer and two SNAC configs under OUTDIR."""

    help = "Build a tiny random-weight Orpheus/Veena checkpoint (needs the vLLM tier)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("outdir", type=Path)

    def handle(self, *args: Any, outdir: Path, **options: Any) -> None:
        from gateway.worker.vllm_env import TIER_MISSING, vllm_installed

        if not vllm_installed():
            raise CommandError(TIER_MISSING.format(what="build_tiny_orpheus"))
        from tts.worker.engines.tiny_orpheus import build_tiny_orpheus

        paths = build_tiny_orpheus(outdir)
        self.stdout.write(f"TTS_VLLM_MODEL={paths.model}")
        self.stdout.write(f"TTS_SNAC_MODEL={paths.snac}  (TTS_SNAC_RANDOM_INIT=true)")
        self.stdout.write(f"snac_24khz architecture: {paths.snac_24khz}")
