"""Tokens by line: lexing resumed where a streaming text grew gives the tokens of a whole lex."""

from __future__ import annotations

import pytest

from tolaria.ui.transcript.syntax.lexers import lexer_for_fence
from tolaria.ui.transcript.syntax.lines import LineTokens

RUST = """/* A comment
   over several lines, with "quotes" */
fn main() {
    let s = "a string
that goes on";
    // done
}
""" * 20
TS = """const a = `template
${1 + 2} literal`;
/** doc
 * comment */
function f(x: number): string { return "x"; }
""" * 20


@pytest.mark.parametrize(("language", "code"), [("rust", RUST), ("ts", TS)])
def test_streamed_text_lexes_like_the_whole_text(language: str, code: str) -> None:
    lexer = lexer_for_fence(language)
    assert lexer is not None
    whole = LineTokens(lexer, code)
    assert whole.ensure(whole.line_count)
    streamed = LineTokens(lexer)
    ends = range(7, len(code) + 7, 7)  # deltas that end anywhere, mid-token too
    for end in ends:
        streamed.set_text(code[:end])
        streamed.ensure(streamed.line_count)
    assert streamed.lines == whole.lines, "multi-line comments and strings resume in their state"
    lines = code.count("\n") + 1
    # Every delta lexes again only from the start of the line it changed (or of the construct
    # still open there): a few lines per delta, where the whole text per delta would be `lines`.
    print(f"{streamed.lexed_count} lines lexed in {len(ends)} deltas of {lines} lines")
    assert streamed.lexed_count < 8 * len(ends)
    assert streamed.lexed_count < len(ends) * lines // 10


def test_a_line_is_lexed_only_when_asked() -> None:
    lexer = lexer_for_fence("python")
    assert lexer is not None
    tokens = LineTokens(lexer, "x = 1\n" * 1000)
    assert tokens.lexed_count == 0
    assert tokens.ensure(9)
    assert tokens.done == 10 and tokens.lexed_count == 10
    assert tokens.line_text(9) == "x = 1"
