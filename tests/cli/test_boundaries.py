"""The command-line client is a client: it imports nothing of the server, and nothing imports it."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import child_env
from tests.support.sources import package_imports

SERVER = {"accounts", "asr", "tts", "gateway", "veena_site", "django", "channels"}


def imported_top_levels(package: str) -> set[str]:
    return {name.split(".")[0] for _, name in package_imports(package)}


def test_the_cli_imports_no_server_module() -> None:
    assert imported_top_levels("veena_cli") & SERVER == set()


def test_no_server_package_imports_the_cli() -> None:
    for package in ("accounts", "asr", "tts", "gateway", "veena_site"):
        assert "veena_cli" not in imported_top_levels(package), package


def test_loading_every_cli_module_loads_no_server_module() -> None:
    code = (
        "import sys, json; import veena_cli.main, veena_cli.say, veena_cli.transcribe; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=child_env(),
        cwd="/",
        capture_output=True,
        text=True,
        check=True,
    )
    assert set(json.loads(out.stdout)) & SERVER == set()
