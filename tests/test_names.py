"""STYLE 61: no public class name is defined twice across the apps (issue 33 item 7).

Every top-level public class of the application packages, by name; Django's management
commands are all called ``Command`` (Django finds them by that name) and are left out.
"""

from __future__ import annotations

import ast
from collections import defaultdict

from tests.support.sources import ROOT, parse

PACKAGES = (
    "accounts",
    "asr",
    "tts",
    "gateway",
    "openai_rest",
    "veena_site",
    "veena_cli",
)


def class_names() -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            command = path.parent.name == "commands"
            for node in parse(path).body:
                if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                    continue
                if not (command and node.name == "Command"):
                    where[node.name].append(str(path.relative_to(ROOT)))
    return where


def test_no_public_class_name_is_defined_twice() -> None:
    names = class_names()
    assert "WorkerLink" in names and "RealtimeProtocolError" in names
    assert {n: p for n, p in names.items() if len(p) > 1} == {}
