"""Write a converted Whisper checkpoint that vLLM and transformers load (engines.md §4.3).

The output directory is built beside its final place and renamed into it, so a crash never
leaves a half-written checkpoint. It records the SHA-256 of its sources; a second run over the
same sources finds it and returns at once. Nothing here reaches a model hub: the sources are a
local CTranslate2 directory and the results are plain files.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from asr.worker.convert.ct2 import read_ct2
from asr.worker.convert.whisper import (
    ConversionError,
    Shape,
    check_settings,
    convert_tensors,
    read_shape,
)

CONVERTER_VERSION = 1  # bump when the output for the same sources changes
STAMP = "veena-conversion.json"
SOURCES = ("model.bin", "config.json", "tokenizer.json")
WEIGHTS = "model.safetensors"
MODEL_RATE = 16_000
HOP_LENGTH = 160
N_FFT = 400
CHUNK_S = 30
Dtype = Literal["float32", "float16"]


@dataclass(frozen=True)
class Prepared:
    """A ready checkpoint directory; ``cached`` when an earlier run had made it."""

    path: Path
    cached: bool
    source_sha256: str


def source_digest(source: Path, dtype: Dtype) -> str:
    """SHA-256 of the source files, the converter version and the output dtype."""
    digest = hashlib.sha256(f"v{CONVERTER_VERSION}:{dtype}".encode())
    for name in SOURCES:
        digest.update(name.encode())
        with open(source / name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def stamped(out: Path) -> str | None:
    """The source digest recorded in ``out``, if it holds a complete conversion."""
    try:
        stamp = json.loads((out / STAMP).read_text())
    except (OSError, ValueError):
        return None
    if not all((out / name).is_file() for name in stamp.get("files", ())):
        return None
    return str(stamp.get("source_sha256"))


def prepare_checkpoint(
    *, source: Path, out: Path, dtype: Dtype = "float32"
) -> Prepared:
    """Convert ``source`` into ``out`` unless ``out`` already holds this conversion."""
    for name in SOURCES:
        if not (source / name).is_file():
            raise ConversionError(f"{source} has no {name}")
    digest = source_digest(source, dtype)
    if stamped(out) == digest:
        return Prepared(out, cached=True, source_sha256=digest)
    if out.exists() and any(out.iterdir()) and not (out / STAMP).exists():
        raise ConversionError(
            f"{out} is not empty and holds no conversion; not replacing it"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        files = write_checkpoint(source, staging, dtype)
        stamp = {
            "source_sha256": digest,
            "converter": CONVERTER_VERSION,
            "files": files,
        }
        (staging / STAMP).write_text(json.dumps(stamp, indent=2) + "\n")
        for path in staging.iterdir():
            path.chmod(0o644)
        staging.chmod(0o755)  # mkdtemp made it private; a checkpoint is plain data
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Prepared(out, cached=False, source_sha256=digest)


def write_checkpoint(source: Path, out: Path, dtype: Dtype) -> list[str]:
    """Write weights and side files into ``out``; returns the file names."""
    from safetensors.numpy import save_file

    model = read_ct2(source / "model.bin")
    settings = check_settings(model)
    shape = read_shape(model, settings)
    tensors = convert_tensors(model, shape)
    save_file(
        {k: np.ascontiguousarray(v.astype(dtype)) for k, v in tensors.items()},
        str(out / WEIGHTS),
        metadata={"format": "pt"},
    )
    ct2_config = json.loads((source / "config.json").read_text())
    tokenizer = json.loads((source / "tokenizer.json").read_text())
    tokens = special_tokens(tokenizer)
    side = {
        "config.json": hf_config(shape, ct2_config, tokens, dtype),
        "generation_config.json": generation_config(shape, ct2_config, tokens),
        "tokenizer_config.json": tokenizer_config(tokens),
        "preprocessor_config.json": preprocessor_config(shape),
        "processor_config.json": {"processor_class": "WhisperProcessor"},
    }
    for name, content in side.items():
        (out / name).write_text(json.dumps(content, indent=2) + "\n")
    shutil.copyfile(source / "tokenizer.json", out / "tokenizer.json")
    return [WEIGHTS, "tokenizer.json", *side]


def special_tokens(tokenizer: dict[str, Any]) -> dict[str, int]:
    """Ids of the added tokens by content, e.g. ``<|notimestamps|>``."""
    return {t["content"]: int(t["id"]) for t in tokenizer.get("added_tokens", ())}


def token(tokens: dict[str, int], content: str) -> int:
    """The id of a special token the checkpoint must have."""
    if content not in tokens:
        raise ConversionError(f"tokenizer.json has no {content}")
    return tokens[content]


def is_multilingual(shape: Shape) -> bool:
    """English-only Whisper checkpoints have 51864 tokens, multilingual ones more."""
    return shape.vocab_size > 51864


def hf_config(
    shape: Shape, ct2: dict[str, Any], tokens: dict[str, int], dtype: Dtype
) -> dict[str, Any]:
    """``config.json`` of ``WhisperForConditionalGeneration``."""
    eot = token(tokens, "<|endoftext|>")
    config = {
        "architectures": ["WhisperForConditionalGeneration"],
        "model_type": "whisper",
        "is_encoder_decoder": True,
        "activation_function": "gelu",
        "scale_embedding": False,
        "tie_word_embeddings": True,
        "bos_token_id": eot,
        "eos_token_id": eot,
        "pad_token_id": eot,
        "decoder_start_token_id": token(tokens, "<|startoftranscript|>"),
        "suppress_tokens": list(ct2.get("suppress_ids", [])),
        "begin_suppress_tokens": list(ct2.get("suppress_ids_begin", [])),
        "dtype": dtype,
        "use_cache": True,
    }
    fields = asdict(shape)
    config.update(
        {k: v for k, v in fields.items() if k not in ("encoder_heads", "decoder_heads")}
    )
    config["encoder_attention_heads"] = shape.encoder_heads
    config["decoder_attention_heads"] = shape.decoder_heads
    return config


def generation_config(
    shape: Shape, ct2: dict[str, Any], tokens: dict[str, int]
) -> dict[str, Any]:
    """``generation_config.json``: the Whisper prompt tokens and suppression lists."""
    eot = token(tokens, "<|endoftext|>")
    config: dict[str, Any] = {
        "decoder_start_token_id": token(tokens, "<|startoftranscript|>"),
        "bos_token_id": eot,
        "eos_token_id": eot,
        "pad_token_id": eot,
        "no_timestamps_token_id": token(tokens, "<|notimestamps|>"),
        "prev_sot_token_id": token(tokens, "<|startofprev|>"),
        "is_multilingual": is_multilingual(shape),
        "alignment_heads": ct2.get("alignment_heads", []),
        "max_initial_timestamp_index": 50,
        "max_length": shape.max_target_positions,
        "suppress_tokens": list(ct2.get("suppress_ids", [])),
        "begin_suppress_tokens": list(ct2.get("suppress_ids_begin", [])),
    }
    if config["is_multilingual"]:
        names = {v: k for k, v in tokens.items()}
        config["lang_to_id"] = {
            names[i]: i for i in ct2.get("lang_ids", []) if i in names
        }
        config["task_to_id"] = {
            "transcribe": token(tokens, "<|transcribe|>"),
            "translate": token(tokens, "<|translate|>"),
        }
    return config


def tokenizer_config(tokens: dict[str, int]) -> dict[str, Any]:
    """``tokenizer_config.json`` for ``WhisperTokenizer`` over the copied tokenizer.json."""
    eot = "<|endoftext|>"
    token(tokens, eot)
    return {
        "tokenizer_class": "WhisperTokenizer",
        "bos_token": eot,
        "eos_token": eot,
        "unk_token": eot,
        "pad_token": eot,
        "add_prefix_space": False,
        "errors": "replace",
        "clean_up_tokenization_spaces": False,
        "model_max_length": 1024,
    }


def preprocessor_config(shape: Shape) -> dict[str, Any]:
    """``preprocessor_config.json`` of ``WhisperFeatureExtractor`` (30 s windows)."""
    return {
        "feature_extractor_type": "WhisperFeatureExtractor",
        "processor_class": "WhisperProcessor",
        "feature_size": shape.num_mel_bins,
        "sampling_rate": MODEL_RATE,
        "hop_length": HOP_LENGTH,
        "n_fft": N_FFT,
        "chunk_length": CHUNK_S,
        "n_samples": CHUNK_S * MODEL_RATE,
        "nb_max_frames": CHUNK_S * MODEL_RATE // HOP_LENGTH,
        "padding_side": "right",
        "padding_value": 0.0,
        "return_attention_mask": False,
    }
