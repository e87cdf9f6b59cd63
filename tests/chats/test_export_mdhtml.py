"""The HTML export's Markdown renderer (tolaria/chats/export/mdhtml.py): what agents write
becomes the right elements, and nothing in an answer becomes markup of its own."""

from __future__ import annotations

from html import escape

from tolaria.chats.export.mdhtml import render


def _code(code: str, language: str) -> str:
    return f'<pre data-lang="{escape(language)}">{escape(code)}</pre>'


def test_blocks() -> None:
    text = ("# Title\n\nA *b* **c** ~~d~~ `e<f>` [g](https://x.org/?a=1&b=2).\n\n"
            "- one\n- two\n  - nested\n- three\n\n3. third\n4. fourth\n\n> quoted **x**\n\n"
            "| a | b |\n|:--|--:|\n| 1 | 2 |\n\n---\n\n~~~js\nlet a = 1 < 2;\n~~~\n")
    assert render(text, _code) == (
        "<h3>Title</h3>\n"
        "<p>A <em>b</em> <strong>c</strong> <del>d</del> <code>e&lt;f&gt;</code> "
        '<a href="https://x.org/?a=1&amp;b=2">g</a>.</p>\n'
        "<ul><li>one</li><li>two<ul><li>nested</li></ul></li><li>three</li></ul>"
        '<ol start="3"><li>third</li><li>fourth</li></ol>\n'
        "<blockquote><p>quoted <strong>x</strong></p>\n</blockquote>\n"
        "<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td>2</td>"
        "</tr></tbody></table>\n<hr>\n"
        '<pre data-lang="js">let a = 1 &lt; 2;</pre>')


def test_nothing_becomes_markup() -> None:
    hostile = ('<script>alert(1)</script> <img src=x onerror=alert(1)> '
               '[x](javascript:alert(1)) [y](" onmouseover="alert(1)) ![z](file:///etc/passwd) '
               '**<b>bold</b>**')
    out = render(hostile, _code)
    assert "<script" not in out and "<img" not in out and "<b>" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert 'href="javascript' not in out and "onmouseover=\"" not in out
    assert 'href="file' not in out and "image: z" in out


def test_an_unclosed_fence_runs_to_the_end() -> None:
    assert render("text\n```python\nx = 1\n", _code) == (
        '<p>text</p>\n<pre data-lang="python">x = 1</pre>')
    assert render("````\n```\ninner\n```\n````\n", _code) == (
        '<pre data-lang="">```\ninner\n```</pre>')
