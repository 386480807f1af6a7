"""What the protocol code defines, read from the code itself, and the tables of the docs.

Where the code keeps a registry as data (``CLIENT_EVENTS``, ``CLOSE_CODES``, ``GA_SCHEMA``, the
SDK event tables) it is imported. Where it does not (server event names built as dict
literals, error codes passed to ``fail`` / the protocol errors, settings read by the consumer
side), the source is parsed with ``ast``, so a new code in any of those places shows up here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.sources import parse

ROOT = Path(__file__).resolve().parents[2]

# The modules of each endpoint's gateway side (wire, consumer, REST) and the shared ones.
SHARED = (
    "gateway/link/budget.py",
    "gateway/link/boundary.py",
    "gateway/link/consumers.py",
)
TTS_MODULES = (
    "tts/consumers.py",
    "tts/protocol.py",
    "tts/request_fields.py",
    "tts/events.py",
    "tts/outputs.py",
    "tts/steps.py",
    "tts/errors.py",
    "tts/forwarding.py",
    "tts/incremental.py",
    "tts/requests.py",
    "tts/session.py",
    "tts/speakers.py",
    "tts/views.py",
    "tts/client.py",
    "tts/worker/jobs.py",
    *SHARED,
)
ASR_MODULES = (
    "asr/consumers.py",
    "asr/steps.py",
    "asr/errors.py",
    "asr/connection.py",
    "asr/events.py",
    "asr/protocol.py",
    "asr/event_schema.py",
    "asr/updates.py",
    "asr/vllm_update.py",
    "asr/config.py",
    "asr/session.py",
    *SHARED,
)
# Calls whose first argument (or ``code=``) is a wire error or warning code.
ERROR_CALLS = frozenset(
    (
        "TtsProtocolError",
        "RealtimeProtocolError",
        "ConfigError",
        "_fail",
        "fail",
        "send_error",
        "vllm_error",
    )
)
CLOSE_CALLS = frozenset(("close_stream", "close"))
CLOSE_KEYWORDS = frozenset(("close_code", "code", "closing"))


def _trees(paths: Iterable[str]) -> Iterator[ast.AST]:
    for path in paths:
        yield parse(ROOT / path, filename=path)


def _called(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def _strings(node: ast.AST) -> set[str]:
    return {
        c.value
        for c in ast.walk(node)
        if isinstance(c, ast.Constant) and isinstance(c.value, str)
    }


def call_codes(paths: Iterable[str], names: frozenset[str]) -> set[str]:
    """String constants passed as the first argument or ``code=`` to calls of ``names``,
    and assigned to a variable named ``code``."""
    codes: set[str] = set()
    for tree in _trees(paths):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called(node) in names:
                args = [
                    *node.args[:1],
                    *(k.value for k in node.keywords if k.arg == "code"),
                ]
                for arg in args:
                    if isinstance(arg, ast.Call) and _called(arg) in names:
                        continue  # an error record passed on: counted as its own call
                    codes |= _strings(arg)
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "code" for t in node.targets
            ):
                codes |= _strings(node.value)
    return codes


def dict_events(paths: Iterable[str], key: str) -> set[str]:
    """The constant values of ``key`` in dict literals: the server events built in place."""
    names: set[str] = set()
    for tree in _trees(paths):
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values, strict=True):
                    if (
                        isinstance(k, ast.Constant)
                        and k.value == key
                        and isinstance(v, ast.Constant)
                        and isinstance(v.value, str)
                    ):
                        names.add(v.value)
    return names


def close_codes(paths: Iterable[str]) -> set[int]:
    """WebSocket close codes the code sends: literals passed as a close code, assigned to a
    ``*CLOSE*`` / ``closing`` name, or in a ``*CLOSE_CODES`` table."""

    def ints(node: ast.AST) -> set[int]:
        return {
            c.value
            for c in ast.walk(node)
            if isinstance(c, ast.Constant)
            and type(c.value) is int
            and 1000 <= c.value <= 4999
        }

    found: set[int] = set()
    for tree in _trees(paths):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                if _called(node) in CLOSE_CALLS:
                    found |= set().union(*(ints(a) for a in node.args[:1]))
                for k in node.keywords:
                    if k.arg in CLOSE_KEYWORDS and _called(node) != "disconnect":
                        found |= ints(k.value)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = (
                    node.targets if isinstance(node, ast.Assign) else [node.target]
                )
                named = [t.id for t in targets if isinstance(t, ast.Name)]
                if any("CLOSE" in n or n == "closing" for n in named) and node.value:
                    found |= ints(node.value)
    return found


def settings_read(paths: Iterable[str]) -> set[str]:
    """Settings read as ``settings.NAME`` or ``getattr(settings, "NAME", …)``."""
    names: set[str] = set()
    for tree in _trees(paths):
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "settings"
                and node.attr.isupper()
            ):
                names.add(node.attr)
            elif (
                isinstance(node, ast.Call)
                and _called(node) == "getattr"
                and len(node.args) >= 2
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id == "settings"
                and isinstance(node.args[1], ast.Constant)
            ):
                names.add(str(node.args[1].value))
    return names


def field_limits(path: str) -> dict[str, tuple[object, ...]]:
    """``number`` / ``ranged_integer`` calls with constant (name, lo, hi)."""
    limits: dict[str, tuple[object, ...]] = {}
    for tree in _trees([path]):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called(node) in (
                "number",
                "ranged_integer",
            ):
                args = node.args[1:]
                if all(isinstance(a, ast.Constant) for a in args) and len(args) == 3:
                    values = [a.value for a in args]  # type: ignore[attr-defined]
                    limits[str(values[0])] = tuple(values[1:])
    return limits


def leaves(schema: Mapping[str, object], prefix: str) -> set[str]:
    """Dotted paths of a nested schema's leaves (``None`` values)."""
    out: set[str] = set()
    for key, child in schema.items():
        path = f"{prefix}.{key}"
        out |= leaves(child, path) if isinstance(child, Mapping) else {path}
    return out


# The docs.


@dataclass
class Section:
    """One heading of a page: its own text (up to the next heading) and its subsections."""

    title: str
    level: int
    text: str
    children: list[Section] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The first backticked name of the title (``### `header` `` → ``header``)."""
        found = re.search(r"`([^`]+)`", self.title)
        return found[1] if found else self.title

    def child(self, title: str) -> Section:
        for section in self.children:
            if section.title == title or section.name == title:
                return section
        raise KeyError(f"no section {title!r} under {self.title!r}")

    def rows(self) -> list[list[str]]:
        """The cells of the table rows directly in this section (header rows skipped)."""
        rows = []
        for line in self.text.splitlines():
            if not line.startswith("|"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if set("".join(cells)) <= set("-: "):
                continue
            rows.append(cells)
        return rows[1:] if rows and not rows[0][0].startswith("`") else rows

    def first_column(self) -> list[str]:
        """The backticked names of the first column of this section's tables."""
        return [name for row in self.rows() if (name := backticked(row[0]))]


def backticked(cell: str) -> str | None:
    """The first backticked token of a cell."""
    found = re.search(r"`([^`]+)`", cell)
    return found[1] if found else None


def page(name: str) -> Section:
    """A page of ``docs/`` as a tree of sections."""
    text = (ROOT / "docs" / name).read_text()
    root = Section(title=name, level=0, text="")
    stack = [root]
    parts = re.split(r"^(#{1,6}) (.*)$", text, flags=re.M)
    root.text = parts[0]
    for i in range(1, len(parts), 3):
        level, title, body = len(parts[i]), parts[i + 1].strip(), parts[i + 2]
        section = Section(title=title, level=level, text=body)
        while stack[-1].level >= level:
            stack.pop()
        stack[-1].children.append(section)
        stack.append(section)
    return root.children[0] if len(root.children) == 1 else root
