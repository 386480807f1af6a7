"""accounts L2: tts/ and asr/ reach accounts only through admission, metering, exceptions."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import ROOT

ALLOWED = {"accounts.admission", "accounts.metering", "accounts.exceptions"}


@pytest.mark.parametrize("app", ["tts", "asr"])
def test_apps_import_only_the_accounts_interface(app: str) -> None:
    offenders = []
    for path in (ROOT / app).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] == "accounts" and name not in ALLOWED:
                    offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert offenders == []
