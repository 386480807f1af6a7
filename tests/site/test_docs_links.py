"""No broken internal link in the README and docs/**, as Markdown and as ``/docs/`` serves them.

As Markdown (what GitHub shows): every relative link names a file or folder of the repository,
and every ``#anchor`` (same page or ``page.md#anchor``) names a heading of its page. As served:
every page of ``/docs/`` answers 200, and every link in it to the site resolves, with each
``/docs/…#anchor`` an element id of the target page.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.urls import Resolver404, resolve

from tests.conftest import ROOT
from veena_site import markdown_pages as mp

PAGES = mp.pages(ROOT)
EXPLICIT_ANCHOR = re.compile(r'<a id="([^"]+)"></a>')


def markdown_links(page: mp.Page) -> list[str]:
    """Every link target of a page, as written."""
    tokens = mp.markdown().parse(page.path.read_text(encoding="utf-8"))
    return [
        str(child.attrGet("href"))
        for token in tokens
        for child in token.children or ()
        if child.type == "link_open"
    ]


def heading_slugs(path: Path) -> set[str]:
    """The anchors of a page: its headings' slugs and its explicit ``<a id="…">``."""
    text = path.read_text(encoding="utf-8")
    tokens = mp.markdown().parse(text)
    texts = [
        mp.heading_text(tokens[i + 1])
        for i, t in enumerate(tokens)
        if t.type == "heading_open"
    ]
    return set(mp.unique_slugs(texts)) | set(EXPLICIT_ANCHOR.findall(text))


def broken_markdown_links(page: mp.Page) -> list[str]:
    broken = []
    for href in markdown_links(page):
        if href.startswith("#"):
            if href[1:] not in heading_slugs(page.path):
                broken.append(href)
            continue
        target = mp.target_of(href, page, ROOT)
        if target is None:
            continue  # an absolute URL: not ours to check offline
        path, fragment = target
        if not (ROOT / path).exists():
            broken.append(href)
        elif fragment and path.endswith(".md"):
            if fragment not in heading_slugs(ROOT / path):
                broken.append(href)
    return broken


@pytest.mark.parametrize("name", sorted(PAGES))
def test_markdown_links_resolve(name: str) -> None:
    assert broken_markdown_links(PAGES[name]) == []


class Links(HTMLParser):
    """The ``href``s and element ids of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "href" and value and tag == "a":
                self.hrefs.append(value)
            if name == "id" and value:
                self.ids.add(value)


@pytest.fixture(scope="module")
def served() -> dict[str, Links]:
    """Every page of /docs/ as the site serves it: path → its links and ids."""
    client = Client()
    out = {}
    for path in ["/docs/", *(p.url for p in PAGES.values())]:
        response = client.get(path)
        assert response.status_code == 200, path
        parsed = Links()
        parsed.feed(response.content.decode())
        out[path] = parsed
    return out


def test_served_links_resolve(served: dict[str, Links]) -> None:
    broken = []
    for path, links in served.items():
        for href in links.hrefs:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc:
                continue
            target = parts.path or path
            if target.startswith("/docs/"):
                if target not in served:
                    broken.append(f"{path}: {href}")
                elif parts.fragment and parts.fragment not in served[target].ids:
                    broken.append(f"{path}: {href}")
                continue
            try:
                resolve(target)
            except Resolver404:
                broken.append(f"{path}: {href}")
    assert broken == []


def test_every_page_is_in_the_navigation(served: dict[str, Links]) -> None:
    listed = set(served["/docs/"].hrefs)
    assert {p.url for p in PAGES.values()} <= listed
    assert "/v1/openapi.json" in listed


def test_navigation_has_the_guide_pages() -> None:
    guide = dict(mp.navigation(PAGES))["Guide"]
    names = [page.name for page, _ in guide]
    for name in (
        "quickstart",
        "tts-protocol",
        "realtime-protocol",
        "rest",
        "usage",
        "cli",
        "deploy",
        "settings",
        "benchmarks",
        "architecture",
    ):
        assert name in names


def test_readme_is_an_entry_point() -> None:
    """At most 300 lines, the two commands, and no specification outside the repository."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    assert "make serve" in readme and "make test" in readme
    assert "shared/specs" not in readme
    assert "](docs/quickstart.md)" in readme
