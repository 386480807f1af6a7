"""The repository explains itself: every reference names a rule in ``docs/``.

Comments, docstrings, tests and docs cite spec rules by ID (``Q5``, ``AU-4``, ``T-V1``) and
section (``§5.3``), and the code style guide by ``STYLE 21``, ``STYLE §2`` and ``F7``;
``tests.docs.spec_refs`` finds them and resolves each to an anchor of a page in ``docs/specs/``
(by the rules of ``docs/specs/README.md``) or of ``docs/style.md``. Nothing may point outside
the repository (the old ``shared/specs/`` folder). The last tests plant bad references in text,
so the checks are seen to fail. ``python -m tests.docs.spec_refs`` prints the inventory.
"""

from __future__ import annotations

import re

import pytest

from tests.docs import spec_refs as s


@pytest.fixture(scope="module")
def defined() -> dict[str, set[str]]:
    return s.all_anchors()


def test_every_spec_reference_resolves(defined: dict[str, set[str]]) -> None:
    refs = s.scan(defined=defined)
    assert len(refs) > 1000  # the scan reads the repository, not an empty list
    bad = [f"{ref.where()}: {ref.problem}" for ref in refs if ref.problem]
    assert not bad, "references that name no rule in docs/:\n" + "\n".join(bad)


def test_nothing_points_outside_the_repository() -> None:
    hits = s.outside_paths()
    assert not hits, "paths outside the repository:\n" + "\n".join(hits)


def test_links_into_the_specs_name_an_anchor(defined: dict[str, set[str]]) -> None:
    pages = {page: spec for spec, page in s.PAGES.items()}
    link = re.compile(r"\((?:[\w./]*/)?(?:docs/)?specs/([\w-]+\.md)#([\w.-]+)\)")
    style_link = re.compile(r"\((?:[\w./]*/)?style\.md#([\w.-]+)\)")
    same_page = re.compile(r"\(#([\w.-]+)\)")
    missing = []
    for name in s.repository_files():
        if not name.endswith(".md"):
            continue
        text = (s.ROOT / name).read_text()
        targets = link.findall(text)
        if name.startswith("docs/specs/"):
            own = name.removeprefix("docs/specs/")
            targets += [(own, anchor) for anchor in same_page.findall(text)]
            targets += re.findall(r"\(([\w-]+\.md)#([\w.-]+)\)", text)
        for page, anchor in targets:
            if page in pages and anchor not in defined[pages[page]]:
                missing.append(f"{name}: {page}#{anchor}")
        style = style_link.findall(text)
        style += same_page.findall(text) if name == s.STYLE_PAGE else []
        missing += [f"{name}: style.md#{a}" for a in style if a not in defined["style"]]
    assert not missing, "links to anchors the pages lack:\n" + "\n".join(missing)


def test_every_page_has_unique_anchors_for_its_statements() -> None:
    for page in s.PAGES.values():
        text = (s.SPECS / page).read_text()
        ids = re.findall(r'<a id="([^"]+)"></a>', text)
        assert len(ids) == len(set(ids)), f"{page}: an anchor twice"
        labels = re.findall(r'<a id="([^"]+)"></a>\*\*([^*]+?)\.?\*\*', text)
        assert all(anchor == s.anchor_of(label) for anchor, label in labels), page
        assert len(ids) > 20, page


def test_the_style_guide_anchors_every_rule_fact_and_section() -> None:
    text = (s.ROOT / s.STYLE_PAGE).read_text()
    ids = re.findall(r'<a id="([^"]+)"></a>', text)
    assert len(ids) == len(set(ids)), "an anchor twice"
    rules = re.findall(r'<a id="style-(\d+)"></a>\*\*(\d+)\. ', text)
    facts = re.findall(r'<a id="f(\d+)"></a>F(\d+) ', text)
    sections = re.findall(r'<a id="sec-(\d+)"></a>(\d+)\. ', text)
    for found, count in ((rules, 62), (facts, 14), (sections, 12)):
        assert all(anchor == label for anchor, label in found), found
        numbers = [int(anchor) for anchor, _ in found]
        first = 0 if found is sections else 1
        assert numbers == list(range(first, first + count)), numbers
    assert len(ids) == 62 + 14 + 12


# The resolver's rules on planted text: these references must fail, those must pass.

DEFINED = {
    "tts": {"q5", "q6", "w5", "sec-6"},
    "realtime": {"ar-3", "t-v1", "sec-16"},
    "accounts": {"q5", "e3", "e6", "ad3"},
    "engines": {"sec-5-3"},
    "style": {"style-14", "style-15", "style-16", "style-21", "sec-1", "sec-2", "f7"},
}


def problems(path: str, text: str) -> list[tuple[str, str | None, str | None]]:
    return [(r.token, r.spec, r.problem) for r in s.refs_in(path, text, DEFINED)]


def test_a_planted_unknown_id_fails() -> None:
    [(token, spec, problem)] = problems("tts/x.py", "# the worker's rule (Q99)\n")
    assert (token, spec) == ("Q99", None) and problem == "defined nowhere"


def test_an_ambiguous_id_outside_its_folder_fails_until_named() -> None:
    [(_, spec, problem)] = problems("gateway/x.py", '"""Timers (Q5)."""\n')
    assert spec is None and problem is not None and "name one" in problem
    assert problems("gateway/x.py", '"""Timers (tts Q5)."""\n') == [("Q5", "tts", None)]
    assert problems("tts/x.py", "# Timers (Q5)\n") == [("Q5", "tts", None)]
    assert problems("accounts/x.py", "# Mirror (Q5)\n") == [("Q5", "accounts", None)]


def test_a_name_carries_over_its_list() -> None:
    found = problems("gateway/x.py", "# (accounts E3, E6; tts Q5/Q6, realtime AR-3)\n")
    assert found == [
        ("E3", "accounts", None),
        ("E6", "accounts", None),
        ("Q5", "tts", None),
        ("Q6", "tts", None),
        ("AR-3", "realtime", None),
    ]
    # A word that is not a joining word ends the list: the second Q5 is unnamed again.
    [_, (_, spec, problem)] = problems("gateway/x.py", "# accounts E3 and then Q5\n")
    assert spec is None and problem is not None


def test_a_named_id_the_page_lacks_fails() -> None:
    [(_, spec, problem)] = problems("tts/x.py", "# (realtime Q5)\n")
    assert spec is None and problem == "not in docs/specs/realtime-asr.md"


def test_sections_need_a_name_outside_their_folder() -> None:
    [(_, _, problem)] = problems("gateway/x.py", "# see §5.3\n")
    assert problem == "a section needs a spec name"
    assert problems("gateway/x.py", "# engines §5.3\n") == [("§5.3", "engines", None)]
    assert problems("tts/x.py", "# errors (§6)\n") == [("§6", "tts", None)]


def test_unique_ids_resolve_anywhere_and_others_are_not_ids() -> None:
    text = '"""W5, AD3, T-V1 and realtime §16; not IDs: PCM16, H264, audio/L16, UTF-8."""\n'
    assert problems("bench/x.py", text) == [
        ("W5", "tts", None),
        ("AD3", "accounts", None),
        ("T-V1", "realtime", None),
        ("§16", "realtime", None),
    ]


def test_code_strings_and_fenced_markdown_are_not_read() -> None:
    assert problems("tts/x.py", 'CODE = "Q99"\nf(x, "Q99")\n') == []
    assert problems("docs/x.md", "```\nQ99\n```\n") == []
    [(token, _, problem)] = problems("docs/x.md", "Text\nwith Q99\n\n```\nQ98\n```\n")
    assert token == "Q99" and problem == "defined nowhere"


def test_paths_outside_the_repository_are_found() -> None:
    assert s._points_outside("tts/x.py", "# shared/specs/tts-ws.md T8")
    assert s._points_outside("docs/x.md", "run `shared/tools/import-graph .`")
    assert s._points_outside("Makefile", "include /work/shared/rules.mk")
    assert s._points_outside("tts/x.py", '"""(specs/tts-ws.md §6)"""')
    assert s._points_outside("docs/x.md", "the [spec](../../shared/tts-ws.md)")
    assert not s._points_outside("tts/x.py", "# docs/specs/tts-ws.md T8")
    assert not s._points_outside(
        "docs/x.md", "[docs/specs/tts-ws.md](specs/tts-ws.md#q5)"
    )
    assert not s._points_outside("asr/x.py", "# ctranslate2/specs/model_spec.py")
    assert not s._points_outside("tests/x.py", "# tests/shared/fixtures.py")


def test_style_citations_resolve_to_the_style_guide() -> None:
    text = "# (STYLE 21) and (STYLE 14–16, F7); what every app shares (STYLE §1–2)\n"
    assert problems("gateway/x.py", text) == [
        ("STYLE 21", "style", None),
        ("STYLE 14", "style", None),
        ("STYLE 15", "style", None),
        ("STYLE 16", "style", None),
        ("STYLE F7", "style", None),
        ("STYLE §1", "style", None),
        ("STYLE §2", "style", None),
    ]
    # A bare fact is the style guide's; a spec ID after a STYLE list is the spec's again.
    found = problems("tts/x.py", '"""No handler (F7) ends it (STYLE 21, Q5)."""\n')
    assert found == [
        ("STYLE 21", "style", None),
        ("F7", "style", None),
        ("Q5", "tts", None),
    ]
    assert problems("tts/x.py", "# noqa: F401, F403 (ruff codes)\n") == []


def test_a_planted_unknown_style_rule_fails() -> None:
    text = "# boundary (STYLE 99); see STYLE 15–17 and STYLE §7, (F15), STYLE Q5\n"
    bad = [(t, p) for t, _, p in problems("gateway/x.py", text) if p]
    assert bad == [
        ("STYLE 99", "not in docs/style.md"),
        ("STYLE 17", "not in docs/style.md"),
        ("STYLE §7", "not in docs/style.md"),
        ("F15", "not in docs/style.md"),
        ("STYLE Q5", "not in docs/style.md"),
    ]
