"""A process that exits with a vLLM engine still open ends, and so does its engine core.

vLLM's engine core is a non-daemon child; without ``gateway.worker.vllm_runner.ENGINES``' exit hook the
interpreter waits for it for ever (a CI run once ran out of time after the suite's summary).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, child_env

pytestmark = pytest.mark.vllm

SCRIPT = textwrap.dedent(
    """
    import json, multiprocessing, sys
    from pathlib import Path
    import django
    django.setup()
    from django.test import override_settings
    from tests.tts.conftest import tiny_vllm_settings
    from tts.worker.engines import load_vllm
    from tts.worker.engines.tiny_orpheus import TinyCheckpoint

    tiny = TinyCheckpoint(**{k: Path(v) for k, v in json.loads(sys.argv[1]).items()})
    with override_settings(**tiny_vllm_settings(tiny, Path(sys.argv[2]))):
        engine = load_vllm()
    print("CORE", *[p.pid for p in multiprocessing.active_children()], flush=True)
    # exits without engine.close()
    """
)


def test_exit_with_an_open_engine_ends_the_engine_core(
    tiny_orpheus: Any, tmp_path: Path
) -> None:
    paths = {k: str(v) for k, v in vars(tiny_orpheus).items()}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(paths), str(tmp_path)],
        env=child_env(DJANGO_SETTINGS_MODULE="tests.settings"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    core = [line for line in proc.stdout.splitlines() if line.startswith("CORE")]
    pids = [int(p) for p in core[0].split()[1:]]
    assert pids, proc.stdout
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid), pid
    assert "still open at exit" in proc.stderr


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True
