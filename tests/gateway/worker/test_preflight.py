"""X_ENGINE=vllm without the vLLM tier stops serve and gpuworker at start with one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, child_env

# Runs manage.py in a process where ``import vllm`` fails, as on a machine without the tier.
WITHOUT_TIER = (
    "import runpy, sys; sys.modules['vllm'] = None; sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def manage_without_tier(
    tmp_path: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_TIER, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=child_env(
            DJANGO_SETTINGS_MODULE="veena_site.settings", DATA_DIR=str(tmp_path), **env
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if "Error" in line]


def registered(kind: str) -> bool:
    if kind == "tts":
        from tts.worker.engines import ENGINES as TTS_ENGINES

        return "vllm" in TTS_ENGINES
    return True


@pytest.mark.parametrize(
    "setting",
    [
        "ASR_ENGINE",
        pytest.param(
            "TTS_ENGINE",
            marks=pytest.mark.skipif(
                not registered("tts"), reason="no TTS vllm engine on this branch yet"
            ),
        ),
    ],
)
def test_embedded_serve_without_the_tier_fails_with_one_line(
    tmp_path: Path, setting: str
) -> None:
    result = manage_without_tier(tmp_path, "serve", "--port", "0", **{setting: "vllm"})
    assert result.returncode == 1
    assert error_lines(result) == [
        f"CommandError: {setting}=vllm needs the vLLM engine tier, which is not "
        "installed: run `make vllm` (CUDA: `make vllm "
        "VLLM_REQUIREMENTS=requirements-vllm-gpu.txt`)"
    ]
    assert not (tmp_path / "db.sqlite3").exists()  # stopped before migrating


def test_gpuworker_without_the_tier_fails_with_one_line(tmp_path: Path) -> None:
    result = manage_without_tier(
        tmp_path,
        "gpuworker",
        "--kinds",
        "asr",
        ASR_ENGINE="vllm",
        REDIS_URL="redis://127.0.0.1:1/0",  # never reached: the check comes first
    )
    assert result.returncode == 1
    assert len(error_lines(result)) == 1
    assert "ASR_ENGINE=vllm needs the vLLM engine tier" in result.stderr


def test_a_gateway_only_machine_is_not_checked(tmp_path: Path) -> None:
    """SERVE_ROLES without a worker never loads an engine: the tier is not needed."""
    result = manage_without_tier(
        tmp_path,
        "serve",
        ASR_ENGINE="vllm",
        SERVE_ROLES="gateway",
        REDIS_URL="redis://127.0.0.1:1/0",
    )
    assert result.returncode == 1
    assert "vLLM engine tier" not in result.stderr
    assert "REDIS_URL (127.0.0.1:1) does not answer" in result.stderr


@pytest.mark.vllm
def test_an_asr_vllm_model_that_is_no_checkpoint_fails_at_start(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "gpuworker", "--kinds", "asr"],
        cwd=ROOT,
        env=child_env(
            DJANGO_SETTINGS_MODULE="veena_site.settings",
            DATA_DIR=str(tmp_path),
            ASR_ENGINE="vllm",
            ASR_VLLM_MODEL="openai/whisper-tiny.en",  # a hub id: never fetched
            REDIS_URL="redis://127.0.0.1:1/0",
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert error_lines(result) == [
        "CommandError: ASR_VLLM_MODEL=openai/whisper-tiny.en is not a local Hugging "
        "Face checkpoint directory (no config.json); make one with `manage.py "
        "prepare_whisper_hf DIR`"
    ]
