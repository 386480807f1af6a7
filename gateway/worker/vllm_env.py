"""The process environment vLLM needs, and one clear error when its tier is not installed.

vLLM and torch are imported only inside engine loaders (STYLE 34); call ``prepare_vllm`` first, in
the worker process, before the first ``import vllm``: it checks the tier is installed and sets the
environment of docs/specs/engines.md §3.2 (offline, no telemetry, caches under the data directory),
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
# vLLM's CPU build binds its OpenMP threads to one logical CPU per physical core ("auto"; on
# 2 vCPUs: one thread). Measured on a shared 2 vCPU host, A/B twice: binding both CPUs ("0,1")
# made a 5.7 s decode take 2.3-2.5 s instead of 0.7-0.8 s (4 at once: 4.7-5.0 s vs 1.6-1.8 s),
# likely because two bound threads wait for each other whenever another process takes a CPU.
OMP_THREADS_BIND = "auto"


class EngineLoadError(RuntimeError):
    """An engine cannot start; the message is one line an operator can act on."""


class VllmUnavailable(EngineLoadError):
    """The vLLM tier is not installed in this environment."""


def vllm_installed() -> bool:
    """True when ``import vllm`` can succeed (checked without importing it)."""
    return importlib.util.find_spec("vllm") is not None


def require_vllm(*, what: str) -> None:
    """Raise ``VllmUnavailable`` (one line naming ``what``) when the tier is missing."""
    if not vllm_installed():
        raise VllmUnavailable(TIER_MISSING.format(what=what))


def prepare_vllm(*, what: str, data_dir: Path) -> None:
    """Fail with one line when the tier is missing, else set vLLM's environment (keeps what is set).

    The KV cache is sized per engine (``kv_cache_memory_bytes``), never through vLLM's legacy
    ``VLLM_CPU_KVCACHE_SPACE``: that variable overrides every engine of the process and must be
    a whole number of GiB.
    """
    require_vllm(what=what)
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
        "VLLM_CPU_OMP_THREADS_BIND": OMP_THREADS_BIND,  # ignored by the CUDA build
        "VLLM_LOGGING_LEVEL": "WARNING",  # load progress and per-request lines are ours
    }
    for name, value in defaults.items():
        os.environ.setdefault(name, value)
    cache.mkdir(parents=True, exist_ok=True)
