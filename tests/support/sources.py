"""The project's source read as syntax trees, safely inside a busy test process.

CPython 3.11 keeps ``ast.parse``'s recursion counter in interpreter-wide state: a collection
that runs while the tree's Python objects are being built can finalize a leftover task, whose
log line formats a traceback, which on 3.11 parses source again and resets the counter, so the
outer parse fails with ``SystemError: AST constructor recursion depth mismatch``. CI saw it after 1,500 tests had left tasks behind.
Every test that parses source goes through :func:`parse`, which builds the tree with the
collector off, so no finalizer (and no other thread's parse) can run inside it.
"""

from __future__ import annotations

import ast
import gc
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def parse(path: Path, filename: str | None = None) -> ast.Module:
    source = path.read_text()
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename=filename or str(path))
    finally:
        if enabled:
            gc.enable()


def imports(path: Path) -> Iterator[str]:
    """Every module named by an import in ``path``: ``from a import b`` gives ``a`` and ``a.b``."""
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)


def package_imports(package: str) -> Iterator[tuple[Path, str]]:
    """(file, imported module) for every import of every module under ``package``."""
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in imports(path):
            yield path, name


def reachable_modules(module: str, project: tuple[str, ...]) -> set[str]:
    """Every module of the ``project`` packages reachable by imports from ``module``."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = ROOT / (name.replace(".", "/") + ".py")
        if not path.exists():
            path = ROOT / name.replace(".", "/") / "__init__.py"
        if not path.exists():
            continue
        seen.add(name)
        todo += [n for n in imports(path) if n.split(".")[0] in project]
    return seen
