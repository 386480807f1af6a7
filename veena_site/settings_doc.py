"""docs/settings.md, generated from the settings code (``manage.py settings_doc``).

Names, kinds and defaults are read with ``ast`` from the modules that read the environment:
``veena_site/settings.py``, every ``veena_site/conf/*.py`` and ``serve``'s own variables.
A setting is every ``env(...)``, ``env.<kind>(...)`` or ``os.environ.get(...)`` call whose
first argument is a literal name; its meaning is its entry in ``veena_site.settings_help``.
Nothing is imported, so the page shows the code's defaults, not this machine's environment.
(Issue 33's settings registry replaces ``collect``; ``render`` stays.)
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from veena_site.settings_help import HELP, INTRO, SECTIONS

PAGE = "docs/settings.md"
SERVE = "veena_site/management/commands/serve.py"
KINDS = {"bool", "int", "float", "list", "json", "str", "url", "path", "dict", "tuple"}
EXPRESSION = object()  # a default that is computed, not a literal


@dataclass
class Setting:
    """One environment variable: where it is read, its kind and its default."""

    name: str
    module: str
    kind: str
    default: str
    literal: object = EXPRESSION  # the default's value, when the code writes a literal
    also: list[str] = field(default_factory=list)  # other modules reading it


def sources(root: Path) -> list[str]:
    """The modules that read settings, repository-relative, in page order."""
    conf = sorted(
        p.relative_to(root).as_posix() for p in root.glob("veena_site/conf/*.py")
    )
    return ["veena_site/settings.py", *conf, SERVE]


def _kind(call: ast.Call) -> str | None:
    """``env(...)`` → str, ``env.int(...)`` → int, ``os.environ.get`` → str; else None."""
    func = call.func
    if isinstance(func, ast.Name) and func.id == "env":
        return "str"
    if not isinstance(func, ast.Attribute):
        return None
    owner = func.value
    if isinstance(owner, ast.Name) and owner.id == "env" and func.attr in KINDS:
        return func.attr
    environ = isinstance(owner, ast.Attribute) and owner.attr == "environ"
    return "str" if environ and func.attr == "get" else None


def _default(call: ast.Call, text: str) -> tuple[str, object]:
    """The default as the page shows it (a value, ``unset``, or the code's expression),
    and its value when it is a literal."""
    node = next((k.value for k in call.keywords if k.arg == "default"), None)
    if node is None and len(call.args) > 1:
        node = call.args[1]
    if node is None:
        return "required", EXPRESSION
    try:
        value = ast.literal_eval(node)
    except ValueError:
        source = " ".join(str(ast.get_source_segment(text, node)).split())
        return "`" + source.replace("( ", "(").replace(", )", ")") + "`", EXPRESSION
    return _shown(value), value


def _shown(value: object) -> str:
    if value is None or value == "":
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list | tuple):
        return f"`{','.join(map(str, value))}`" if value else "empty"
    return f"`{value}`"


def collect(root: Path) -> list[Setting]:
    """Every setting the sources read, first reader first, in source order."""
    found: dict[str, Setting] = {}
    for module in sources(root):
        text = (root / module).read_text(encoding="utf-8")
        calls = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call)]
        for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
            kind = _kind(call)
            first = call.args[0] if call.args else None
            if kind is None or not isinstance(first, ast.Constant):
                continue
            name = str(first.value)
            if name in found:
                if module not in found[name].also and module != found[name].module:
                    found[name].also.append(module)
                continue
            found[name] = Setting(name, module, kind, *_default(call, text))
    return list(found.values())


def missing_help(settings: list[Setting]) -> list[str]:
    """Settings with no meaning written, then meanings with no setting."""
    names = {s.name for s in settings}
    return sorted(names - set(HELP)) + sorted(set(HELP) - names)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(setting: Setting) -> str:
    meaning = HELP.get(setting.name, "(undocumented)")
    if setting.also:
        meaning = (
            meaning.rstrip(".")
            + ". Also read by "
            + ", ".join(f"`{m}`" for m in setting.also)
            + "."
        )
    cells = [f"`{setting.name}`", setting.kind, setting.default, meaning]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def render(settings: list[Setting]) -> str:
    """The whole page."""
    lines = [INTRO.strip(), ""]
    for module in dict.fromkeys(s.module for s in settings):
        title, about = SECTIONS.get(module, (module, ""))
        lines += [f"## {title}", "", f"Read in `{module}`. {about}".rstrip(), ""]
        lines += ["| Variable | Kind | Default | Meaning |", "|---|---|---|---|"]
        lines += [_row(s) for s in settings if s.module == module]
        lines.append("")
    return "\n".join(lines)


def page(root: Path) -> str:
    """docs/settings.md as the code says it should read."""
    return render(collect(root))
