"""A tiny random-weight Orpheus/Veena-layout checkpoint for tests and the CPU benchmark.

engines §3.3: a Llama with head_dim 32 (the CPU attention backend's smallest size), a vocabulary
covering the audio range and tied embeddings (~10 M parameters), a small byte-level BPE with the
Veena ``<spk_…>`` voice tokens, and two SNAC ``config.json`` files without weights (load them with
``TTS_SNAC_RANDOM_INIT``): ``snac`` has the snac_24khz layout (hop, strides, kernels, noise, so
the same frame length and context reach) with a 128-wide decoder that decodes ~6× faster on a
CPU, and ``snac_24khz`` is the real architecture. ``manage.py build_tiny_orpheus OUTDIR`` writes
one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tts.orpheus.snac_tokens import VOCAB_MIN
from tts.orpheus.vllm_prompts import VEENA

VOCAB_SIZE = VOCAB_MIN + 2  # 156940, as the Orpheus checkpoints
BPE_VOCAB = 512
# hubertsiuzdak/snac_24khz config.json (engines §5.6).
SNAC_24KHZ = {
    "sampling_rate": 24000,
    "encoder_dim": 48,
    "encoder_rates": [2, 4, 8, 8],
    "decoder_dim": 1024,
    "decoder_rates": [8, 8, 4, 2],
    "attn_window_size": None,
    "codebook_size": 4096,
    "codebook_dim": 8,
    "vq_strides": [4, 2, 1],
    "noise": True,
    "depthwise": True,
}
_CORPUS = (
    "The quick brown fox jumps over the lazy dog. Hello world, how are you today? "
    "A journey of a thousand miles begins with a single step. Please call me back. "
    "नमस्ते, आप कैसे हैं? मैं ठीक हूँ। Numbers: one two three four five six seven."
)


TINY_SNAC = SNAC_24KHZ | {"decoder_dim": 128}


@dataclass(frozen=True)
class TinyCheckpoint:
    """Where the model directories are."""

    model: Path
    snac: Path  # the narrow decoder
    snac_24khz: Path  # the full snac_24khz architecture


def tiny_paths(outdir: Path) -> TinyCheckpoint:
    """The directories ``build_tiny_orpheus`` writes under ``outdir``."""
    return TinyCheckpoint(
        model=outdir / "llama", snac=outdir / "snac", snac_24khz=outdir / "snac_24khz"
    )


def build_tiny_orpheus(outdir: Path, *, seed: int = 0) -> TinyCheckpoint:
    """Write the checkpoint under ``outdir`` (kept if already complete); return its paths."""
    paths = tiny_paths(outdir)
    if not (paths.model / "model.safetensors").exists():
        paths.model.mkdir(parents=True, exist_ok=True)
        _write_tokenizer(paths.model)
        _write_llama(paths.model, seed)
    for directory, config in ((paths.snac, TINY_SNAC), (paths.snac_24khz, SNAC_24KHZ)):
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.json").write_text(json.dumps(config, indent=2))
    return paths


def _write_tokenizer(directory: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator([_CORPUS], trainer=trainer)
    tokenizer.add_special_tokens([f"<spk_{voice}>" for voice in VEENA.voices])
    tokenizer.save(str(directory / "tokenizer.json"))


def _write_llama(directory: Path, seed: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=128_000,
        eos_token_id=128_009,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(directory)
