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
outside fenced code blocks; other text files whole. ``STYLE 22`` and ``STYLE §1`` cite the
team's style guide, not a spec page, and are skipped. ``python -m tests.docs.spec_refs`` prints
the inventory.
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
# The names a reference may be prefixed with, and the page each names.
_NAME = {
    "tts": "tts",
    "tts-ws": "tts",
    "realtime": "realtime",
    "realtime-asr": "realtime",
    "accounts": "accounts",
    "engines": "engines",
    "STYLE": "style",  # the team's style guide, not a spec: its rules are not checked here
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
# Paths that lead out of the repository: the team's shared/ folder (specs, tools), and
# specs/ not under docs/.
OUTSIDE = re.compile(
    r"(?:(?<![\w/.\-])shared/|/work/shared|\.\./shared|(?<![\w/.\-])specs/)"
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
    """The explicit anchors of one spec page."""
    path = SPECS / PAGES[spec]
    return set(_ANCHOR.findall(path.read_text())) if path.exists() else set()


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
    fenced, start, lines = False, 0, []
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
        named: str | None = None
        last_end = -1
        for match in REF.finditer(piece):
            qualifier = _QUALIFIER.search(piece, 0, match.start())
            if qualifier:
                named = _NAME[qualifier.group("name")]
            elif not (named and _LIST_GAP.fullmatch(piece, last_end, match.start())):
                named = None
            last_end = match.end()
            if named == "style":
                continue
            line = first + piece.count("\n", 0, match.start())
            ref = _resolve(path, line, match.group(0), named, defined)
            if ref.problem and named and not qualifier:
                # A list's name yields to a home or a single page that has the ID.
                ref = _resolve(path, line, match.group(0), None, defined)
            yield ref


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
    defined = defined if defined is not None else {s: anchors(s) for s in PAGES}
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
    """Print what the repository cites (outside the spec pages), and what fails."""
    refs = scan()
    cited = [r for r in refs if not r.path.startswith("docs/specs/")]
    bad = [r for r in refs if r.problem]
    for spec in PAGES:
        tokens = sorted({r.token for r in cited if r.spec == spec})
        ids = [t for t in tokens if not t.startswith("§")]
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
