"""The repository's Markdown pages as HTML for ``/docs/``: discovery, navigation, rendering.

Every ``docs/**/*.md`` is a page (``docs/deploy.md`` at ``/docs/deploy/``, ``docs/specs/x.md``
at ``/docs/specs/x/``), and ``README.md`` is ``/docs/readme/``. markdown-it-py renders them
(CommonMark plus tables; raw HTML passes, since the pages are the repository's own). Headings
get GitHub's anchor ids, so a link such as ``deploy.md#tls`` works on GitHub and here alike;
relative links to other pages become their ``/docs/`` URLs, and links to other repository
files (``../veena_cli/errors.py``) become the path in code, since the server does not serve
them.
"""

from __future__ import annotations

import functools
import posixpath
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token

README = "readme"
# The navigation's fixed part: page name → label, the usage API then its accounting rules. A
# name with no page is left out; every other page is listed after these, under "More".
NAV: tuple[tuple[str, str], ...] = (
    (README, "Overview"),
    ("quickstart", "Quickstart"),
    ("tts-protocol", "TTS socket"),
    ("realtime-protocol", "Realtime"),
    ("rest", "REST"),
    ("usage", "Usage API and accounts"),
    ("accounting", "Accounting rules"),
    ("cli", "CLI"),
    ("clients", "Clients and SDK pitfalls"),
    ("dashboard", "Dashboard and playground"),
    ("deploy", "Deploy"),
    ("operations", "Operations"),
    ("settings", "Settings"),
    ("engines", "vLLM engines"),
    ("benchmarks", "Benchmarks"),
    ("architecture", "Architecture"),
)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass(frozen=True)
class Page:
    """One Markdown file: its name in URLs and its path in the repository."""

    name: str  # "deploy", "specs/tts-ws", "readme"
    path: Path

    @property
    def url(self) -> str:
        return f"/docs/{self.name}/"


@dataclass(frozen=True)
class Rendered:
    """A page as HTML, with its title (the first heading) and its heading ids."""

    title: str
    html: str
    anchors: frozenset[str]


def pages(root: Path) -> dict[str, Page]:
    """Every page of the repository at ``root``, by name."""
    found = {README: Page(README, root / "README.md")}
    docs = root / "docs"
    for path in sorted(docs.rglob("*.md")):
        name = path.relative_to(docs).with_suffix("").as_posix()
        found[name] = Page(name, path)
    return found


def navigation(found: dict[str, Page]) -> list[tuple[str, list[tuple[Page, str]]]]:
    """The sections of the navigation: the fixed list, then every other page."""
    fixed = [(found[name], label) for name, label in NAV if name in found]
    named = {name for name, _ in NAV}
    more = [
        (page, render(page, found).title)
        for name, page in found.items()
        if name not in named
    ]
    return [("Guide", fixed)] + ([("More", more)] if more else [])


def slug(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    text = unicodedata.normalize("NFC", text).strip().lower()
    kept = "".join(
        c for c in text if c in " -_" or unicodedata.category(c)[0] in ("L", "N")
    )
    return kept.replace(" ", "-")


def heading_text(inline: Token) -> str:
    """The plain text of a heading's inline token (code spans without backticks)."""
    return "".join(
        child.content
        for child in inline.children or ()
        if child.type in ("text", "code_inline")
    )


def unique_slugs(texts: Iterable[str]) -> list[str]:
    """Slugs of headings in order, repeated ones numbered as GitHub does (``-1``, ``-2``)."""
    seen: dict[str, int] = {}
    out = []
    for text in texts:
        base = slug(text)
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.append(base if count == 0 else f"{base}-{count}")
    return out


def markdown() -> MarkdownIt:
    """The parser: CommonMark with tables; raw HTML passes (the pages are our own)."""
    options = {"html": True, "highlight": _one_block_a_line}
    return MarkdownIt("commonmark", options).enable("table")


def _one_block_a_line(content: str, lang: str, attrs: str) -> str:
    """A ``text`` block (a recorded transcript, one event a line) as one element a line,
    so a line that wraps hangs under its start (site.css); "" leaves other blocks to
    markdown-it."""
    if lang != "text":
        return ""
    return "".join(
        f'<span class="line">{escapeHtml(line)}</span>'
        for line in content.rstrip("\n").split("\n")
    )


def render(page: Page, found: dict[str, Page]) -> Rendered:
    """The page as HTML (cached per file version)."""
    root = found[README].path.parent
    return _render(page, page.path.stat().st_mtime_ns, tuple(sorted(found)), root)


@functools.lru_cache(maxsize=256)
def _render(page: Page, mtime_ns: int, names: tuple[str, ...], root: Path) -> Rendered:
    md = markdown()
    tokens = md.parse(page.path.read_text(encoding="utf-8"))
    anchors, title = _set_heading_ids(tokens)
    _label_cells(tokens)
    for token in tokens:
        for child in token.children or ():
            if child.type == "link_open":
                _rewrite_link(child, page, root, set(names))
    html = md.renderer.render(tokens, md.options, {})
    return Rendered(title or page.name, html, frozenset(anchors))


def _set_heading_ids(tokens: list[Token]) -> tuple[list[str], str]:
    heads = [i for i, t in enumerate(tokens) if t.type == "heading_open"]
    texts = [heading_text(tokens[i + 1]) for i in heads]
    ids = unique_slugs(texts)
    for index, anchor in zip(heads, ids, strict=True):
        tokens[index].attrSet("id", anchor)
    title = next(
        (text for i, text in zip(heads, texts, strict=True) if tokens[i].tag == "h1"),
        "",
    )
    return ids, title


def _label_cells(tokens: list[Token]) -> None:
    """Give each table cell its column's header as ``data-label``, so a phone can show
    the rows as blocks that still say which value is which."""
    headers: list[str] = []
    column = 0
    for index, token in enumerate(tokens):
        if token.type == "thead_open":
            headers = []
        elif token.type == "th_open":
            headers.append(heading_text(tokens[index + 1]))
        elif token.type == "tr_open":
            column = 0
        elif token.type == "td_open":
            if column < len(headers) and headers[column]:
                token.attrSet("data-label", headers[column])
            column += 1


def target_of(href: str, page: Page, root: Path) -> tuple[str, str] | None:
    """A relative link's repository path (posix, from the root) and fragment; None for
    absolute URLs, other schemes and same-page anchors."""
    if not href or href.startswith(("#", "/")) or _SCHEME.match(href):
        return None
    parts = urlsplit(href)
    here = page.path.parent.relative_to(root).as_posix()
    joined = posixpath.normpath(posixpath.join(here, parts.path))
    return joined, parts.fragment


def page_name(repo_path: str) -> str | None:
    """The page a repository path names (``docs/deploy.md`` → ``deploy``), or None."""
    if repo_path == "README.md":
        return README
    if repo_path.startswith("docs/") and repo_path.endswith(".md"):
        return repo_path[len("docs/") : -len(".md")]
    return None


def _rewrite_link(token: Token, page: Page, root: Path, names: set[str]) -> None:
    href = str(token.attrGet("href") or "")
    target = target_of(href, page, root)
    if target is None:
        return
    path, fragment = target
    name = page_name(path)
    if name is not None and name in names:
        token.attrSet("href", f"/docs/{name}/" + (f"#{fragment}" if fragment else ""))
    elif path.rstrip("/") == "docs":
        token.attrSet("href", "/docs/")
    else:  # a file of the repository the server does not serve: show its path
        token.attrs.pop("href", None)
        token.attrSet("class", "repo-path")
        token.attrSet("title", f"{path} in the repository")
