"""Piper's model as two sessions, so a sentence's first audio waits for part of its decoder (issue 13).

A Piper (VITS) voice runs its text encoder, duration predictor and flow over the whole sentence,
then its HiFi-GAN decoder turns the latent frames (``hop`` samples each) into audio; the decoder
takes ~70 % of a run. Its convolutions see only a few frames either side, so the decoder run on
the first frames plus ``CONTEXT_FRAMES`` after them gives the samples of a whole decode: within
2.2e-6 from 10 frames on (a fifteenth of a 16-bit step: float sums in another order), 0.005 at
8, over 19 sentences split at 4 places each (2026-12-05). The sentence's prosody is the whole
sentence's: nothing is cut before the decoder. A split decodes 2 x 10 frames twice: +6 % of the
split sentence's run (~8 ms on 2 vCPUs).

The model is split with ``onnx.utils.Extractor`` at the decoder's input (the input of
``/dec/conv_pre/Conv`` in Piper's export), once per model file, in a child process that writes
the two parts to a cache folder: split in the worker itself, the ONNX protobufs and the parts'
bytes left it 80 MiB larger; sessions read from the files take what the whole model's took.
The encoder and decoder run on one ``RunOptions`` in turn; with their threads' spinning stopped
at the end of each run, the two runs take as long as the whole model's one (943 against 954 ms
for 8 sentences on 2 threads).

The encoder also outputs the duration predictor's frames per phoneme id (the input of the
latent's ``CumSum``, the one ``Ceil`` of the export, as ``piper.patch_voice_with_alignment``
finds it), so word timestamps cost no extra run (issue 35).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime

# The first node of the decoder in Piper's ONNX export; its first input is the latent.
DECODER_FIRST_NODE = "/dec/conv_pre/Conv"
# Latent frames each side of a piece that its decode also runs on (10 give a whole decode's
# samples within 2.2e-6).
CONTEXT_FRAMES = 10
# Where the parts go when the caller names no folder.
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "veena-piper-split"
ENCODER, DECODER, LATENT = "encoder.onnx", "decoder.onnx", "latent"
DURATIONS = "durations"
# The layout of a cache folder; a new one is split again (2: the encoder gives durations).
LAYOUT = 2

Latent = npt.NDArray[np.float32]  # (1, channels, frames)
Durations = npt.NDArray[np.float32]  # latent frames per phoneme id (whole numbers)


def split_model(path: str | Path, folder: str | Path) -> None:
    """Write the encoder and decoder of the Piper model at ``path`` to ``folder``, the
    durations' name when there is one (``DURATIONS``), then the latent's name (``LATENT``,
    last: its presence means the folder is whole).

    Raises ``ValueError`` when the model has no decoder where Piper's export puts it.
    """
    import onnx
    import onnx.utils

    model = onnx.load(str(path))
    first = [n for n in model.graph.node if n.name == DECODER_FIRST_NODE]
    if not first:
        raise ValueError(f"no {DECODER_FIRST_NODE} node: not a Piper VITS export")
    latent = first[0].input[0]
    inputs = [i.name for i in model.graph.input]
    outputs = [o.name for o in model.graph.output]
    ceil = [o for n in model.graph.node if n.op_type == "Ceil" for o in n.output]
    timed = [latent, *ceil] if len(ceil) == 1 else [latent]
    extractor = onnx.utils.Extractor(model)
    out = Path(folder)
    onnx.save(extractor.extract_model(inputs, timed), str(out / ENCODER))
    onnx.save(extractor.extract_model([latent], outputs), str(out / DECODER))
    if len(timed) == 2:
        (out / DURATIONS).write_text(timed[1], encoding="utf-8")
    (out / LATENT).write_text(latent, encoding="utf-8")


@dataclass(frozen=True)
class SplitModel:
    """A Piper model's encoder and decoder files, the tensor between them, and the
    encoder's durations output (None: the export has none)."""

    encoder: str
    decoder: str
    latent: str
    durations: str | None = None

    @classmethod
    def read(cls, path: str | Path, cache: Path = DEFAULT_CACHE) -> SplitModel:
        """The parts of the model at ``path``, split by a child process the first time."""
        model = Path(path)
        stat = model.stat()
        folder = cache / f"{model.stem}-{stat.st_size}-{stat.st_mtime_ns}-{LAYOUT}"
        if not (folder / LATENT).exists():
            cache.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(dir=cache, prefix=".split-"))
            try:
                subprocess.run(
                    [sys.executable, "-m", __name__, str(model), str(work)],
                    cwd=Path(__file__).resolve().parents[3],
                    check=True,
                    capture_output=True,
                )
                work.rename(folder)  # whole or not at all; another worker may be first
            except OSError:
                if not (folder / LATENT).exists():
                    raise
            finally:
                shutil.rmtree(work, ignore_errors=True)
        durations = folder / DURATIONS
        return cls(
            str(folder / ENCODER),
            str(folder / DECODER),
            (folder / LATENT).read_text(encoding="utf-8"),
            durations.read_text(encoding="utf-8") if durations.exists() else None,
        )


class SplitSession:
    """The encoder and decoder sessions of one thread count; ``run`` is the whole model's."""

    def __init__(self, model: SplitModel, opts: onnxruntime.SessionOptions) -> None:
        providers = ["CPUExecutionProvider"]
        self.latent = model.latent
        self._encoded = [model.latent] + ([model.durations] if model.durations else [])
        self.encoder = onnxruntime.InferenceSession(
            model.encoder, opts, providers=providers
        )
        self.decoder = onnxruntime.InferenceSession(
            model.decoder, opts, providers=providers
        )

    def run(
        self,
        output_names: list[str] | None,
        inputs: dict[str, Any],
        run_options: onnxruntime.RunOptions | None = None,
    ) -> list[Any]:
        """The whole model: encode, then decode every frame."""
        latent = self.encode(inputs, run_options)
        decoded: list[Any] = self.decoder.run(
            output_names, {self.latent: latent}, run_options=run_options
        )
        return decoded

    def encode(
        self, inputs: dict[str, Any], run_options: onnxruntime.RunOptions | None
    ) -> Latent:
        """The sentence's latent frames."""
        return self.encode_timed(inputs, run_options)[0]

    def encode_timed(
        self, inputs: dict[str, Any], run_options: onnxruntime.RunOptions | None
    ) -> tuple[Latent, Durations | None]:
        """The sentence's latent frames and its frames per phoneme id (None: unknown)."""
        encoded = self.encoder.run(self._encoded, inputs, run_options=run_options)
        durations = encoded[1].reshape(-1) if len(encoded) > 1 else None
        return encoded[0], durations

    def decode(
        self,
        latent: Latent,
        start: int,
        stop: int,
        run_options: onnxruntime.RunOptions | None,
    ) -> npt.NDArray[np.float32]:
        """The samples of frames ``start:stop``, the same as a whole decode's."""
        frames = latent.shape[2]
        low, high = max(0, start - CONTEXT_FRAMES), min(frames, stop + CONTEXT_FRAMES)
        piece = np.ascontiguousarray(latent[:, :, low:high])
        audio = self.decoder.run(None, {self.latent: piece}, run_options=run_options)
        samples: npt.NDArray[np.float32] = audio[0].reshape(-1)
        hop = samples.size // (high - low)
        return samples[(start - low) * hop : (stop - low) * hop]


def run_timed(
    session: Any, inputs: dict[str, Any], options: onnxruntime.RunOptions
) -> tuple[npt.NDArray[np.float32], Durations | None]:
    """A whole sentence's audio and, from a split session, its phoneme durations."""
    if isinstance(session, SplitSession):
        latent, durations = session.encode_timed(inputs, options)
        return session.decode(latent, 0, latent.shape[2], options), durations
    audio: npt.NDArray[np.float32] = session.run(None, inputs, run_options=options)[0]
    return audio, None


def pieces(frames: int, first: int) -> list[tuple[int, int]]:
    """A sentence of ``frames`` latent frames in decoder pieces: the first ``first`` frames,
    then the rest; one piece when the rest would be shorter than the context (or ``first``
    is 0)."""
    if first <= 0 or frames - first < CONTEXT_FRAMES:
        return [(0, frames)]
    return [(0, first), (first, frames)]


if __name__ == "__main__":  # the child of SplitModel.read
    split_model(sys.argv[1], sys.argv[2])
