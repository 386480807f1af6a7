"""The spec references of the repository: where each one is, and the anchor it names.

A reference is a statement ID (``Q5``, ``AU-4``, ``T-V1``) or a section (``§5.3``) of one of
the pages in ``docs/specs/``; ``docs/specs/README.md`` gives the rules this module applies:

* a spec name right before a reference picks the page (``tts Q5``, ``accounts' E7``,
  ``docs/specs/engines.md §5.3``), and carries over a list that follows it
  (``accounts E3, E6``, ``tts Q5/Q6``, ``accounts U1–U3``);
* an unnamed reference is the page of the file's home (``tts/`` and ``tests/tts/`` cite the
  TTS spec, ``asr/`` and ``tests/asr/`` the realtime spec, ``accounts/`` and
  ``tests/accounts/`` the accounts spec) when that page defines it, else the one page that
  does; an ID that two pages define and no name or home picks is ambiguous.

Python files are read through ``tokenize``: comments and docstrings only. Markdown is read
outside fenced code blocks; other text files whole.

The code style guide, ``docs/style.md``, is cited by rule (``STYLE 22``, ``STYLE 14–15``),
section (``STYLE §1–2``) or fact (``STYLE F7``, or a bare ``F7``: no spec page uses the
letter F); each resolves to its anchor there (``style-22``, ``sec-1``, ``f7``), and a range
to every number in it. ``python -m tests.docs.spec_refs`` prints the inventory.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "docs" / "specs"
PAGES = {
    "tts": "tts-ws.md",
    "realtime": "realtime-asr.md",
    "accounts": "accounts.md",
    "engines": "engines.md",
}
STYLE_PAGE = "docs/style.md"
# The names a reference may be prefixed with, and the page each names.
_NAME = {
    "tts": "tts",
    "tts-ws": "tts",
    "realtime": "realtime",
    "realtime-asr": "realtime",
    "accounts": "accounts",
    "engines": "engines",
    "STYLE": "style",  # docs/style.md: only its own items (STYLE_REF) follow the name
}
HOMES = (
    ("tts/", "tts"),
    ("tests/tts/", "tts"),
    ("asr/", "realtime"),
    ("tests/asr/", "realtime"),
    ("accounts/", "accounts"),
    ("tests/accounts/", "accounts"),
    ("docs/tts-protocol.md", "tts"),
    ("docs/realtime-protocol.md", "realtime"),
    *((f"docs/specs/{page}", spec) for spec, page in PAGES.items()),
)
# ID letters the pages use: a token with other letters (PCM16, H264) is not a reference.
_LETTERS = "AD|AU|SP|TS|[A-EGHIKLMQRSTUVWXZ]"
_REALTIME_LETTERS = "AR|CN|AU|DI|SE|AI|VD|IT|VL|ER|LM|MT|WK|SA"
_NUMBER = r"[1-9]\d?"
REF = re.compile(
    rf"(?<![\w.\-§])(?<![a-z]/)(?:§(?P<sec>\d+(?:\.\d+)*)"
    rf"|(?P<id>T-[A-Z]{_NUMBER}|(?:{_REALTIME_LETTERS})-{_NUMBER}|(?:{_LETTERS}){_NUMBER}))"
    r"(?![\w\-]|\.\d)"
)
_QUALIFIER = re.compile(
    r"(?<![\w\-])(?P<name>tts-ws|tts|realtime-asr|realtime|accounts|engines|STYLE)"
    r"(?:\.md)?(?:['’]s?)?\s+$"
)
# Between two references of one list: "E3, E6", "Q5/Q6", "U1–U3", "§6 and E4".
_LIST_GAP = re.compile(r"\s*(?:,|/|–|—|-|\+|&|;|\band\b|\bor\b|\bto\b)?\s*")
# The style guide: "STYLE 21", "STYLE 14–15", "STYLE §1–2", "STYLE F7", "STYLE 21 and 38".
_STYLE_ITEM = r"(?:§\d{1,2}|F?[1-9]\d?)"
_STYLE_GAP = r"\s*(?:,|/|–|—|-|&|\band\b|\bor\b|\bto\b)\s*"
STYLE_REF = re.compile(
    rf"(?<![\w\-])STYLE\s+(?P<items>{_STYLE_ITEM}(?:{_STYLE_GAP}{_STYLE_ITEM})*)"
    r"(?![\w\-]|\.\d)"
)
_STYLE_PART = re.compile(rf"(?P<gap>{_STYLE_GAP})?(?P<item>{_STYLE_ITEM})")
_RANGE_GAPS = {"–", "—", "-", "to"}
# A fact of the style guide cited without its name: "(F2)". Not F401 (a ruff code).
FACT = re.compile(r"(?<![\w.\-§])F[1-9]\d?(?![\w\-]|\.\d)")
# Paths that lead out of the repository: the team's shared/ folder (specs, tools), and
# specs/ not under docs/ (a quoted "specs/…" is the name of a docs page, as /docs/ serves it).
OUTSIDE = re.compile(
    r"(?:(?<![\w/.\-])shared/|/work/shared|\.\./shared|(?<![\w/.\-\"'])specs/)"
)
_LINK_TARGET = re.compile(r"\]\(([^)\s]*)[^)]*\)")
_ANCHOR = re.compile(r'<a id="([^"]+)"></a>')
_FENCE = re.compile(r"^\s*(```|~~~)")
TEXT_SUFFIXES = {".md", ".js", ".mjs", ".html", ".lua", ".sh", ".toml", ".txt", ".css"}
TEXT_NAMES = {"Makefile", "run", ".gitignore"}
IGNORED = {"__pycache__", "node_modules"}
# These quote references as examples (the test plants bad ones).
SELF = {
    "tests/docs/spec_refs.py",
    "tests/docs/test_spec_ids.py",
    "docs/specs/README.md",
    "tests/site/test_docs_links.py",
}


@dataclass(frozen=True)
class Ref:
    """One reference: where it is, what it says, and the page it resolves to."""

    path: str
    line: int
    token: str
    named: str | None  # the spec a name or list gave it
    spec: str | None  # where it resolves; None when it does not
    problem: str | None

    def where(self) -> str:
        return f"{self.path}:{self.line}: {self.token}"


def anchor_of(token: str) -> str:
    """The anchor id of a reference: ``Q5`` → ``q5``, ``AU-4`` → ``au-4``, ``§5.3`` → ``sec-5-3``."""
    if token.startswith("§"):
        return "sec-" + token[1:].replace(".", "-")
    return token.lower()


def anchors(spec: str) -> set[str]:
    """The explicit anchors of one spec page, or of the style guide (``"style"``)."""
    path = ROOT / STYLE_PAGE if spec == "style" else SPECS / PAGES[spec]
    return set(_ANCHOR.findall(path.read_text())) if path.exists() else set()


def all_anchors() -> dict[str, set[str]]:
    """The anchors of every spec page and of the style guide, by name."""
    return {spec: anchors(spec) for spec in (*PAGES, "style")}


def style_anchor(token: str) -> str:
    """``STYLE 21`` → ``style-21``, ``STYLE §1`` → ``sec-1``, ``STYLE F7`` / ``F7`` → ``f7``."""
    item = token.removeprefix("STYLE ")
    if item.startswith("§"):
        return "sec-" + item[1:]
    return item.lower() if item.startswith("F") else f"style-{item}"


def style_items(items: str) -> list[str]:
    """The items a STYLE list names: ``14–16, F7`` → ``14 15 16 F7``, ``§1–2`` → ``§1 §2``."""
    found: list[tuple[str, int]] = []
    for part in _STYLE_PART.finditer(items):
        item, gap = part.group("item"), (part.group("gap") or "").strip()
        kind, number = item.rstrip("0123456789"), int(item.lstrip("§F"))
        if gap in _RANGE_GAPS and found:
            start_kind, start = found[-1]
            kind = kind or start_kind  # "§1–2": the end is a section too
            if kind == start_kind and start < number:
                found.extend((kind, n) for n in range(start + 1, number))
        found.append((kind, number))
    return [f"{kind}{number}" for kind, number in found]


def home(path: str) -> str | None:
    """The spec an unnamed reference in ``path`` cites first."""
    return next((spec for prefix, spec in HOMES if path.startswith(prefix)), None)


def repository_files() -> list[str]:
    """Tracked and untracked (not ignored) text files of the repository."""
    try:
        names = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):  # not a checkout: walk the tree
        names = list(_walk())
    return sorted(
        name for name in set(names) if (ROOT / name).is_file() and _is_text(name)
    )


def _walk() -> Iterator[str]:
    """The tree's files but what .gitignore leaves out (hidden, caches, ``var/``)."""
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if _kept_dir(Path(top) / d)]
        for name in files:
            yield str((Path(top) / name).relative_to(ROOT))


def _kept_dir(path: Path) -> bool:
    hidden = path.name.startswith(".") and path.name != ".ci"
    return not (hidden or path.name in IGNORED or path == ROOT / "var")


def _is_text(name: str) -> bool:
    path = Path(name)
    if "node_modules" in path.parts or path.name == "package-lock.json":
        return False
    return path.suffix in TEXT_SUFFIXES | {".py"} or path.name in TEXT_NAMES


def prose(path: str, text: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of each piece of prose that may cite the specs."""
    if path.endswith(".py"):
        yield from _python_prose(text)
    elif path.endswith(".md"):
        yield from _markdown_prose(text)
    else:
        yield 1, text


def _python_prose(text: str) -> Iterator[tuple[int, str]]:
    """Comments, and strings that stand alone as a statement (docstrings)."""
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    starts = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL}
    previous = tokenize.NEWLINE
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
        elif tok.type == tokenize.STRING and previous in starts:
            after = next(
                (t.type for t in tokens[i + 1 :] if t.type != tokenize.NL), None
            )
            if after in (tokenize.NEWLINE, tokenize.ENDMARKER):
                yield tok.start[0], tok.string
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            previous = tok.type


def _markdown_prose(text: str) -> Iterator[tuple[int, str]]:
    """Markdown outside fenced code blocks, one paragraph (run of lines) at a time."""
    fenced, start = False, 0
    lines: list[str] = []
    for number, line in enumerate([*text.splitlines(), ""], start=1):
        if _FENCE.match(line):
            fenced = not fenced
        if fenced or _FENCE.match(line) or not line.strip():
            if lines:
                yield start, "\n".join(lines)
            lines = []
        else:
            start = start if lines else number
            lines.append(line)


def refs_in(path: str, text: str, defined: dict[str, set[str]]) -> Iterator[Ref]:
    """Every reference in one file, resolved against the anchors in ``defined``."""
    for first, piece in prose(path, text):
        spans: list[tuple[int, int]] = []
        for match in STYLE_REF.finditer(piece):
            spans.append(match.span())
            line = first + piece.count("\n", 0, match.start())
            for item in style_items(match.group("items")):
                yield _style_ref(path, line, f"STYLE {item}", defined)
        for match in FACT.finditer(piece):
            if not any(start <= match.start() < end for start, end in spans):
                line = first + piece.count("\n", 0, match.start())
                yield _style_ref(path, line, match.group(0), defined)
        yield from _spec_refs_in(path, first, piece, spans, defined)


def _spec_refs_in(
    path: str,
    first: int,
    piece: str,
    spans: list[tuple[int, int]],
    defined: dict[str, set[str]],
) -> Iterator[Ref]:
    """The spec references of one piece of prose, outside the STYLE lists in ``spans``."""
    named: str | None = None
    last_end = -1
    for match in REF.finditer(piece):
        if any(start <= match.start() < end for start, end in spans):
            continue  # an item of a STYLE list: done above
        line = first + piece.count("\n", 0, match.start())
        qualifier = _QUALIFIER.search(piece, 0, match.start())
        if qualifier:
            named = _NAME[qualifier.group("name")]
        elif not (named and _LIST_GAP.fullmatch(piece, last_end, match.start())):
            named = None
        last_end = match.end()
        if named == "style":  # "STYLE Q5": the guide has no such item
            yield _style_ref(path, line, f"STYLE {match.group(0)}", defined)
            continue
        ref = _resolve(path, line, match.group(0), named, defined)
        if ref.problem and named and not qualifier:
            # A list's name yields to a home or a single page that has the ID.
            ref = _resolve(path, line, match.group(0), None, defined)
        yield ref


def _style_ref(path: str, line: int, token: str, defined: dict[str, set[str]]) -> Ref:
    ok = style_anchor(token) in defined["style"]
    problem = None if ok else f"not in {STYLE_PAGE}"
    return Ref(path, line, token, "style", "style" if ok else None, problem)


def _resolve(
    path: str, line: int, token: str, named: str | None, defined: dict[str, set[str]]
) -> Ref:
    key = anchor_of(token)
    if named is not None:
        ok = key in defined[named]
        problem = None if ok else f"not in docs/specs/{PAGES[named]}"
        return Ref(path, line, token, named, named if ok else None, problem)
    own = home(path)
    if own is not None and key in defined[own]:
        return Ref(path, line, token, None, own, None)
    if token.startswith("§"):
        return Ref(path, line, token, None, None, "a section needs a spec name")
    holders = [spec for spec in PAGES if key in defined[spec]]
    if len(holders) == 1:
        return Ref(path, line, token, None, holders[0], None)
    problem = f"in {' and '.join(holders)}: name one" if holders else "defined nowhere"
    return Ref(path, line, token, None, None, problem)


def scan(
    files: list[str] | None = None, defined: dict[str, set[str]] | None = None
) -> list[Ref]:
    """Every reference of the repository's files (or of ``files``)."""
    defined = defined if defined is not None else all_anchors()
    found: list[Ref] = []
    for name in files if files is not None else repository_files():
        if name not in SELF:
            found.extend(refs_in(name, (ROOT / name).read_text(), defined))
    return found


def outside_paths(files: list[str] | None = None) -> list[str]:
    """``path:line: text`` of every line that points outside the repository."""
    hits = []
    for name in files if files is not None else repository_files():
        if name in SELF:
            continue
        for number, line in enumerate((ROOT / name).read_text().splitlines(), 1):
            if _points_outside(name, line):
                hits.append(f"{name}:{number}: {line.strip()}")
    return hits


def _points_outside(name: str, line: str) -> bool:
    """A path out of the repository, or a Markdown link whose target leaves it."""
    if not name.endswith(".md"):
        return OUTSIDE.search(line) is not None
    targets = _LINK_TARGET.findall(line)
    if OUTSIDE.search(_LINK_TARGET.sub("]()", line)):
        return True
    return any(_leaves_root(name, target) for target in targets)


def _leaves_root(name: str, target: str) -> bool:
    """Whether a relative link target of the page ``name`` resolves outside ROOT."""
    path = target.split("#")[0]
    if not path or ":" in path or path.startswith("/"):
        return False  # an anchor, a URL or a site path: not a file of the repository
    resolved = ((ROOT / name).parent / path).resolve()
    return not resolved.is_relative_to(ROOT.resolve())


def main() -> None:
    """Print what the repository cites (outside the pages cited), and what fails."""
    refs = scan()
    pages = ("docs/specs/", STYLE_PAGE)
    cited = [r for r in refs if not r.path.startswith(pages)]
    bad = [r for r in refs if r.problem]
    for spec in (*PAGES, "style"):
        tokens = sorted({r.token for r in cited if r.spec == spec})
        ids = [t for t in tokens if "§" not in t]
        print(
            f"{spec}: {len(ids)} IDs, {len(tokens) - len(ids)} sections: {' '.join(tokens)}"
        )
    distinct = {(r.spec, r.token) for r in cited if r.spec}
    print(f"{len(cited)} references to {len(distinct)} distinct IDs and sections")
    print(f"{len(bad)} unresolved (spec pages included)")
    for ref in bad:
        print(f"  {ref.where()}: {ref.problem}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
