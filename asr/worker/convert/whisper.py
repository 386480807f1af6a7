"""CTranslate2 Whisper variables → Hugging Face ``WhisperForConditionalGeneration`` tensors.

The inverse of CTranslate2's ``WhisperLoader`` (engines.md §4.2). Every tensor variable is used
exactly once and every scalar setting is checked against what the Hugging Face model assumes;
anything else (an unknown variable, a quantised weight, a non-zero fused key bias) is an error,
because a silently dropped or misread tensor still loads and then transcribes garbage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from asr.worker.convert.ct2 import Ct2FormatError, Ct2Model, Variable

SPEC = "WhisperSpec"
GELU = 3  # ctranslate2.specs.common_spec.Activation.GELU
# Scalar settings of a Whisper spec and the only values the HF model supports (None: any).
SETTINGS: dict[str, int | None] = {
    "decoder/activation": GELU,
    "decoder/alibi": 0,
    "decoder/pre_norm": 1,
    "decoder/scale_embeddings": 0,
    "decoder/start_from_zero_embedding": 0,
    "decoder/alignment_heads": None,
    "decoder/alignment_layer": None,
    "decoder/num_heads": None,
    "encoder/num_heads": None,
}
TIED_ALIAS = ("decoder/projection/weight", "decoder/embeddings/weight")
_LAYER = re.compile(r"^(encoder|decoder)/layer_(\d+)/")


class ConversionError(ValueError):
    """The CTranslate2 model cannot be converted faithfully."""


@dataclass(frozen=True)
class Shape:
    """The architecture read from the tensors themselves."""

    d_model: int
    vocab_size: int
    num_mel_bins: int
    encoder_layers: int
    decoder_layers: int
    encoder_heads: int
    decoder_heads: int
    encoder_ffn_dim: int
    decoder_ffn_dim: int
    max_source_positions: int
    max_target_positions: int


class _Consumer:
    """Hands out each tensor variable once and reports the ones never asked for."""

    def __init__(self, model: Ct2Model) -> None:
        self.model = model
        self.used: set[str] = set()

    def take(self, name: str) -> np.ndarray:
        variable = self.model.variables.get(name)
        if variable is None:
            raise ConversionError(f"missing variable {name}")
        if name in self.used:
            raise ConversionError(f"variable {name} used twice")
        self.used.add(name)
        return _weights(variable)

    def leftovers(self) -> list[str]:
        return sorted(set(self.model.variables) - self.used)


def _weights(variable: Variable) -> np.ndarray:
    if not variable.is_float:
        raise ConversionError(
            f"{variable.name} is quantised (dtype id {variable.dtype_id}); "
            "convert from a float16/float32 model"
        )
    return variable.array().astype(np.float32)


def check_settings(model: Ct2Model) -> dict[str, int]:
    """The scalar settings, each checked against the HF model's assumptions."""
    if model.spec != SPEC:
        raise ConversionError(f"spec {model.spec!r} is not {SPEC}")
    if model.aliases != dict([TIED_ALIAS]):
        raise ConversionError(f"unexpected aliases {model.aliases}")
    values: dict[str, int] = {}
    for name, expected in SETTINGS.items():
        variable = model.variables.get(name)
        if variable is None:
            raise ConversionError(f"missing setting {name}")
        try:
            value = variable.scalar()
        except Ct2FormatError as err:
            raise ConversionError(str(err)) from None
        if expected is not None and value != expected:
            raise ConversionError(f"{name} = {value}; only {expected} is supported")
        values[name] = value
    return values


def read_shape(model: Ct2Model, settings: dict[str, int]) -> Shape:
    """The architecture, from tensor shapes and the head counts."""
    v = model.variables

    def layers(side: str) -> int:
        found = {int(m[2]) for n in v if (m := _LAYER.match(n)) and m[1] == side}
        if found != set(range(len(found))) or not found:
            raise ConversionError(f"{side} layers are not numbered 0..n-1")
        return len(found)

    vocab, d_model = v["decoder/embeddings/weight"].shape
    return Shape(
        d_model=d_model,
        vocab_size=vocab,
        num_mel_bins=v["encoder/conv1/weight"].shape[1],
        encoder_layers=layers("encoder"),
        decoder_layers=layers("decoder"),
        encoder_heads=settings["encoder/num_heads"],
        decoder_heads=settings["decoder/num_heads"],
        encoder_ffn_dim=v["encoder/layer_0/ffn/linear_0/weight"].shape[0],
        decoder_ffn_dim=v["decoder/layer_0/ffn/linear_0/weight"].shape[0],
        max_source_positions=v["encoder/position_encodings/encodings"].shape[0],
        max_target_positions=v["decoder/position_encodings/encodings"].shape[0],
    )


def _split(
    take: _Consumer, ct2: str, hf: str, parts: tuple[str, ...]
) -> dict[str, np.ndarray]:
    """A fused linear layer split on axis 0; the ``k`` bias must be zero and is dropped."""
    weight, bias = take.take(f"{ct2}/weight"), take.take(f"{ct2}/bias")
    out: dict[str, np.ndarray] = {}
    for part, w, b in zip(
        parts,
        np.split(weight, len(parts)),
        np.split(bias, len(parts)),
        strict=True,
    ):
        out[f"{hf}.{part}_proj.weight"] = w
        if part == "k":
            if np.any(b != 0):
                raise ConversionError(f"{ct2}: the fused key bias is not zero")
        else:
            out[f"{hf}.{part}_proj.bias"] = b
    return out


def _linear(take: _Consumer, ct2: str, hf: str) -> dict[str, np.ndarray]:
    return {
        f"{hf}.weight": take.take(f"{ct2}/weight"),
        f"{hf}.bias": take.take(f"{ct2}/bias"),
    }


def _norm(take: _Consumer, ct2: str, hf: str) -> dict[str, np.ndarray]:
    return {
        f"{hf}.weight": take.take(f"{ct2}/gamma"),
        f"{hf}.bias": take.take(f"{ct2}/beta"),
    }


def _layer(take: _Consumer, side: str, i: int) -> dict[str, np.ndarray]:
    ct2, hf = f"{side}/layer_{i}", f"model.{side}.layers.{i}"
    out = _split(
        take, f"{ct2}/self_attention/linear_0", f"{hf}.self_attn", ("q", "k", "v")
    )
    out |= _linear(take, f"{ct2}/self_attention/linear_1", f"{hf}.self_attn.out_proj")
    out |= _norm(take, f"{ct2}/self_attention/layer_norm", f"{hf}.self_attn_layer_norm")
    if side == "decoder":
        cross = f"{hf}.encoder_attn"
        out |= _linear(take, f"{ct2}/attention/linear_0", f"{cross}.q_proj")
        out |= _split(take, f"{ct2}/attention/linear_1", cross, ("k", "v"))
        out |= _linear(take, f"{ct2}/attention/linear_2", f"{cross}.out_proj")
        out |= _norm(
            take, f"{ct2}/attention/layer_norm", f"{hf}.encoder_attn_layer_norm"
        )
    out |= _linear(take, f"{ct2}/ffn/linear_0", f"{hf}.fc1")
    out |= _linear(take, f"{ct2}/ffn/linear_1", f"{hf}.fc2")
    out |= _norm(take, f"{ct2}/ffn/layer_norm", f"{hf}.final_layer_norm")
    return out


def convert_tensors(model: Ct2Model, shape: Shape) -> dict[str, np.ndarray]:
    """Every HF tensor (float32), after checking every CT2 tensor was used exactly once."""
    take = _Consumer(model)
    take.used.update(SETTINGS)
    out = _linear(take, "encoder/conv1", "model.encoder.conv1")
    out |= _linear(take, "encoder/conv2", "model.encoder.conv2")
    for side in ("encoder", "decoder"):
        out[f"model.{side}.embed_positions.weight"] = take.take(
            f"{side}/position_encodings/encodings"
        )
        count = shape.encoder_layers if side == "encoder" else shape.decoder_layers
        for i in range(count):
            out |= _layer(take, side, i)
        out |= _norm(take, f"{side}/layer_norm", f"model.{side}.layer_norm")
    out["model.decoder.embed_tokens.weight"] = take.take("decoder/embeddings/weight")
    leftovers = take.leftovers()
    if leftovers:
        raise ConversionError(f"unused variables: {', '.join(leftovers[:5])}")
    return out
