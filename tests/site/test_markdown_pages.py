"""How /docs/ names pages, makes anchors and rewrites links (veena_site.markdown_pages)."""

from __future__ import annotations

from pathlib import Path

import pytest

from veena_site import markdown_pages as mp


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        (
            "OpenAI-compatible REST: `/audio/speech`, `/audio/transcriptions`, `/models`",
            "openai-compatible-rest-audiospeech-audiotranscriptions-models",
        ),
        ("`POST /v1/tts`", "post-v1tts"),
        ("Whisper on vLLM (`ASR_ENGINE=vllm`)", "whisper-on-vllm-asr_enginevllm"),
        (
            "5. Limits and what hitting them looks like",
            "5-limits-and-what-hitting-them-looks-like",
        ),
        ("Usage → rollups, and “quotas”…", "usage--rollups-and-quotas"),
    ],
)
def test_anchors_are_githubs(heading: str, anchor: str) -> None:
    tokens = mp.markdown().parse(f"## {heading}\n")
    assert mp.unique_slugs([mp.heading_text(tokens[1])]) == [anchor]


def test_repeated_headings_are_numbered() -> None:
    assert mp.unique_slugs(["Errors", "Errors", "Errors"]) == [
        "errors",
        "errors-1",
        "errors-2",
    ]


def test_nested_pages_render_with_their_links_rewritten(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# Readme\n\n[Deploy](docs/deploy.md#tls)\n")
    (tmp_path / "docs" / "specs").mkdir(parents=True)
    (tmp_path / "docs" / "deploy.md").write_text(
        "# Deploy\n\n## TLS\n\n[up](../README.md)\n"
    )
    (tmp_path / "docs" / "specs" / "tts-ws.md").write_text(
        "# TTS spec\n\n[deploy](../deploy.md#tls) [code](../../tts/protocol.py)"
        " [web](https://example.com/) [here](#tts-spec)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    )
    found = mp.pages(tmp_path)
    assert sorted(found) == ["deploy", "readme", "specs/tts-ws"]
    spec = mp.render(found["specs/tts-ws"], found)
    assert spec.title == "TTS spec" and spec.anchors == {"tts-spec"}
    assert 'href="/docs/deploy/#tls"' in spec.html
    assert 'class="repo-path"' in spec.html and "tts/protocol.py" in spec.html
    assert 'href="https://example.com/"' in spec.html
    assert 'href="#tts-spec"' in spec.html and "<table>" in spec.html
    assert '<td data-label="a">1</td><td data-label="b">2</td>' in spec.html.replace(
        "\n", ""
    )
    assert 'href="/docs/deploy/#tls"' in mp.render(found["readme"], found).html
    assert 'href="/docs/readme/"' in mp.render(found["deploy"], found).html
    more = dict(mp.navigation(found))["More"]
    assert [(p.name, label) for p, label in more] == [("specs/tts-ws", "TTS spec")]


def test_a_transcript_is_one_element_a_line_and_other_code_is_left_alone() -> None:
    md = mp.markdown()
    html = md.render('```text\nC→S {"a": "<b>"}\nS→C closes 1000\n```\n')
    assert html == (
        '<pre><code class="language-text">'
        '<span class="line">C→S {&quot;a&quot;: &quot;&lt;b&gt;&quot;}</span>'
        '<span class="line">S→C closes 1000</span></code></pre>\n'
    )
    assert md.render("```sh\necho <x>\n```\n") == (
        '<pre><code class="language-sh">echo &lt;x&gt;\n</code></pre>\n'
    )
