"""The process environment vLLM needs, and one clear error when its tier is not installed.

vLLM and torch are imported only inside engine loaders (STYLE 34); call ``prepare_vllm`` first, in
the worker process, before the first ``import vllm``: it checks the tier is installed and sets the
environment of shared/specs/engines.md §3.2 (offline, no telemetry, caches under the data directory),
which vLLM reads at import time and its spawned engine-core process inherits.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

TIER_MISSING = (
    "{what} needs the vLLM engine tier, which is not installed: run `make vllm` "
    "(CUDA: `make vllm VLLM_REQUIREMENTS=requirements-vllm-gpu.txt`)"
)


class VllmUnavailable(RuntimeError):
    """The vLLM tier is not installed in this environment."""


def vllm_installed() -> bool:
    """True when ``import vllm`` can succeed (checked without importing it)."""
    return importlib.util.find_spec("vllm") is not None


def prepare_vllm(*, what: str, data_dir: Path, kv_cache_gib: float) -> None:
    """Fail with one line when the tier is missing, else set vLLM's environment (keeps what is set)."""
    if not vllm_installed():
        raise VllmUnavailable(TIER_MISSING.format(what=what))
    cache = data_dir / "cache"
    defaults = {
        "HF_HUB_OFFLINE": "1",  # models are local directories; never reach a hub
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HF_HOME": str(cache / "huggingface"),
        "XDG_CACHE_HOME": str(cache),
        "VLLM_CACHE_ROOT": str(cache / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
        "VLLM_CPU_KVCACHE_SPACE": f"{kv_cache_gib:g}",  # GiB; ignored by the CUDA build
    }
    for name, value in defaults.items():
        os.environ.setdefault(name, value)
    cache.mkdir(parents=True, exist_ok=True)
