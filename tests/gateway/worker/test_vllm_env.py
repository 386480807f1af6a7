"""The vLLM tier's environment and its one-line error when the tier is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.worker import vllm_env


def test_missing_tier_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_env, "vllm_installed", lambda: False)
    with pytest.raises(vllm_env.VllmUnavailable) as err:
        vllm_env.prepare_vllm(what="ASR_ENGINE=vllm", data_dir=Path("."))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("ASR_ENGINE=vllm needs the vLLM engine tier")
    assert "make vllm" in message
    assert isinstance(err.value, vllm_env.EngineLoadError)


def test_environment_is_offline_and_under_the_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(vllm_env, "vllm_installed", lambda: True)
    environ = {"HF_HOME": "/kept/as/set"}
    monkeypatch.setattr(vllm_env.os, "environ", environ)
    vllm_env.prepare_vllm(what="TTS_ENGINE=vllm", data_dir=tmp_path)
    assert environ["HF_HUB_OFFLINE"] == "1"
    assert environ["VLLM_CACHE_ROOT"] == str(tmp_path / "cache" / "vllm")
    assert environ["HF_HOME"] == "/kept/as/set"
    # vLLM's legacy KV variable would override every engine's own size (and must be whole
    # GiB); engines size their cache with kv_cache_memory_bytes instead.
    assert "VLLM_CPU_KVCACHE_SPACE" not in environ
    assert environ["VLLM_CPU_OMP_THREADS_BIND"] == "auto"
