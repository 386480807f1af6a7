"""The settings registry: every setting declared once, with its type, default and meaning.

An area's module of ``veena_site/conf/`` opens a :class:`Group` and declares each of its
settings on it, one line a setting, bound to the module-level name Django reads::

    _tts = Group(__name__, "The TTS socket", "What it limits.")
    TTS_MAX_TEXT_CHARS = _tts.env("TTS_MAX_TEXT_CHARS", int, 50_000, "characters of …")
    TTS_PROGRESS_EVERY = _tts.constant("TTS_PROGRESS_EVERY", 10, "frames between …")

``env`` declares an operator's setting, read from the environment variable of its name when
the module is imported (django-environ's parsing); ``constant`` a tuning constant, never read
from the environment. Tests change either with Django's ``settings`` fixture; a child process
of a test or a benchmark gets constants through :data:`OVERRIDES`, a JSON object that only
``tests/settings.py`` and ``bench/support/settings.py`` apply (:func:`child_environment`
writes it, :func:`overrides` reads it). ``veena_site/settings_doc.py`` renders the registry
as docs/settings.md.
"""

from __future__ import annotations

import ast
import functools
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

import environ

T = TypeVar("T")
Kind = Literal["env", "constant"]
# Issue 33: the environment variables an operator reads about stay few.
MAX_OPERATOR_SETTINGS = 80
# Read by tests/settings.py and bench/support/settings.py only.
OVERRIDES = "SETTINGS_OVERRIDES"
# The modules of veena_site/conf/ that declare settings, in the order of docs/settings.md.
AREAS = ("server", "backbone", "endpoints", "accounts", "engines", "decoding")

ENV = environ.Env()

# The value types a setting may have: the page's name for each, and how the environment's
# text becomes a value (django-environ: ``true``/``1``/``yes``/``on``, comma lists, JSON).
Read = Callable[[str, Any], Any]
READERS: dict[type, tuple[str, Read]] = {
    bool: ("bool", lambda name, default: ENV.bool(name, default=default)),
    int: ("int", lambda name, default: ENV.int(name, default=default)),
    float: ("float", lambda name, default: ENV.float(name, default=default)),
    str: ("str", lambda name, default: ENV.str(name, default=default)),
    list: ("list", lambda name, default: ENV.list(name, default=default)),
    dict: ("json", lambda name, default: ENV.json(name, default=default)),
    Path: ("path", lambda name, default: Path(ENV.str(name, default=str(default)))),
}
PARSERS: dict[type, Callable[[str], Any]] = {
    bool: lambda text: environ.Env.parse_value(text, bool),
    int: int,
    float: float,
    str: str,
    list: lambda text: environ.Env.parse_value(text, list),
    dict: json.loads,
    Path: Path,
}


@dataclass(frozen=True)
class Setting:
    """One setting: its name, value type, default, meaning, area, and how it is set."""

    name: str
    type: type
    default: Any
    help: str
    group: Group
    kind: Kind
    shown: str = ""  # the default as the page writes it, when it is computed

    @property
    def type_name(self) -> str:
        return READERS[self.type][0]

    def checked(self, value: Any) -> Any:
        """``value`` as this setting holds it; text is parsed as the environment's is."""
        if isinstance(value, str) and self.type is not str:
            value = PARSERS[self.type](value)
        if value is None and self.default is None:
            return None
        if (
            self.type is float
            and isinstance(value, int)
            and not isinstance(value, bool)
        ):
            return float(value)
        if not isinstance(value, self.type) or (
            self.type is int and isinstance(value, bool)
        ):
            raise environ.ImproperlyConfigured(
                f"{self.name} takes a {self.type_name}, not {value!r}"
            )
        return value


@dataclass(eq=False)
class Registry:
    """Every declared setting by name, and the groups in the order they were opened."""

    groups: list[Group] = field(default_factory=list)
    settings: dict[str, Setting] = field(default_factory=dict)

    def add(self, setting: Setting) -> None:
        if setting.name in self.settings:
            raise environ.ImproperlyConfigured(f"{setting.name} is declared twice")
        self.settings[setting.name] = setting

    def of_kind(self, kind: Kind) -> list[Setting]:
        return [s for s in self.settings.values() if s.kind == kind]


SETTINGS = Registry()


@functools.cache
def declared_kinds() -> dict[str, Kind]:
    """Each setting's kind, read from the area modules' source: importing them would read
    this process's environment, which a benchmark's parent may still be setting up."""
    kinds: dict[str, Kind] = {}
    for area in AREAS:
        source = (Path(__file__).parent / f"{area}.py").read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("env", "constant")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                kinds[str(node.args[0].value)] = (
                    "env" if node.func.attr == "env" else "constant"
                )
    return kinds


@dataclass(eq=False)
class Group:
    """The settings of one area, declared in ``module``; a section of the page."""

    module: str
    title: str
    about: str
    registry: Registry = SETTINGS

    def __post_init__(self) -> None:
        self.registry.groups.append(self)

    @property
    def path(self) -> str:
        return self.module.replace(".", "/") + ".py"

    @overload
    def env(
        self, name: str, type: type[T], default: None, help: str, *, shown: str = ""
    ) -> T | None: ...

    @overload
    def env(
        self, name: str, type: type[T], default: T, help: str, *, shown: str = ""
    ) -> T: ...

    def env(
        self, name: str, type: type[T], default: T | None, help: str, *, shown: str = ""
    ) -> T | None:
        """Declare an operator's setting; its value from the environment, else ``default``."""
        setting = Setting(name, type, default, help, self, "env", shown)
        setting.checked(default)
        self.registry.add(setting)
        value: T | None = READERS[type][1](name, default)
        return value

    @overload
    def constant(
        self, name: str, value: None, help: str, *, type: type[T], shown: str = ""
    ) -> T | None: ...

    @overload
    def constant(self, name: str, value: T, help: str, *, shown: str = "") -> T: ...

    def constant(
        self,
        name: str,
        value: T | None,
        help: str,
        *,
        type: type | None = None,
        shown: str = "",
    ) -> T | None:
        """Declare a tuning constant: ``value``, whatever the environment says (``type``
        names the type of one that is ``None``)."""
        kind = type or next(t for t in READERS if isinstance(value, t))
        self.registry.add(Setting(name, kind, value, help, self, "constant", shown))
        return value


def overrides(text: str, registry: Registry = SETTINGS) -> dict[str, Any]:
    """The constants ``text`` (the JSON of :data:`OVERRIDES`) sets, checked."""
    values = json.loads(text) if text.strip() else {}
    if not isinstance(values, dict):
        raise environ.ImproperlyConfigured(f"{OVERRIDES} must be a JSON object")
    return {name: _constant(name, registry).checked(v) for name, v in values.items()}


def _constant(name: str, registry: Registry) -> Setting:
    setting = registry.settings.get(name)
    if setting is None:
        raise environ.ImproperlyConfigured(f"{OVERRIDES}: no setting {name}")
    if setting.kind != "constant":
        raise environ.ImproperlyConfigured(
            f"{OVERRIDES}: {name} is an environment variable: set it by its name"
        )
    return setting


def apply_overrides(namespace: dict[str, Any]) -> None:
    """Set the constants :data:`OVERRIDES` names in a settings module's ``namespace``
    (called by ``tests/settings.py`` and ``bench/support/settings.py`` only: production
    never reads the variable)."""
    namespace.update(overrides(os.environ.get(OVERRIDES, "")))


def child_environment(base: Mapping[str, str], **values: Any) -> dict[str, str]:
    """``base`` with ``values`` set for a child process: an operator's setting (or another
    variable) as its environment variable, a constant merged into :data:`OVERRIDES`, which
    only the test and bench settings modules read; the child checks their types, and so
    does this process when it has declared them."""
    env = dict(base)
    constants = json.loads(env.get(OVERRIDES) or "{}")
    for name, value in values.items():
        if declared_kinds().get(name) != "constant":
            env[name] = _as_text(value)
        elif setting := SETTINGS.settings.get(name):
            constants[name] = setting.checked(value)
        else:
            constants[name] = value
    if constants and env.get("DJANGO_SETTINGS_MODULE") == "veena_site.settings":
        raise environ.ImproperlyConfigured(
            f"veena_site.settings ignores {OVERRIDES}: use tests.settings or"
            " bench.support.settings"
        )
    if constants:
        env[OVERRIDES] = json.dumps(constants)
    return env


def _as_text(value: Any) -> str:
    """A value as an environment variable writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)
