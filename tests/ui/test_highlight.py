"""Code blocks and diffs coloured by Pygments: languages, fence names, guesses, laziness on huge
blocks, streaming, theme switches (real widgets, offscreen)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pygments.token import Comment, Keyword, String, _TokenType
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication, QScrollArea
from pytestqt.qtbot import QtBot

from tolaria.core.events import TextDelta, ToolStart
from tolaria.ui import theme
from tolaria.ui.transcript.cards.code import CodeBlock, CodeText
from tolaria.ui.transcript.syntax import colors
from tolaria.ui.transcript.syntax.lexers import guess, lexer_for_fence
from tolaria.ui.transcript.turn_view import TurnView
from tolaria.ui.transcript.view import TranscriptView

SID = "ai-agent-stream-highlight01"


@pytest.fixture(autouse=True)
def light_theme() -> Iterator[None]:
    theme.apply_theme("light")
    yield
    theme.apply_theme("system")  # the palette is the application's: leave it as found


def color_at(text: CodeText, line: int, column: int) -> QColor | None:
    """The foreground the highlighter gave ``column`` of ``line`` (None: the text's own)."""
    block = text.document().findBlockByNumber(line)
    for fmt in block.layout().formats():
        if fmt.start <= column < fmt.start + fmt.length and fmt.format.hasProperty(
                fmt.format.Property.ForegroundBrush):
            return fmt.format.foreground().color()
    return None


def coloured_lines(text: CodeText) -> list[int]:
    document, lines = text.document(), []
    for line in range(document.blockCount()):
        formats = document.findBlockByNumber(line).layout().formats()
        if any(f.format.hasProperty(f.format.Property.ForegroundBrush) for f in formats):
            lines.append(line)
    return lines


def expected(ttype: _TokenType) -> QColor:
    fmt = colors.token_format(ttype, theme.is_dark())
    assert fmt is not None
    return fmt.foreground().color()


def shown_block(qtbot: QtBot, language: str, code: str) -> CodeBlock:
    block = CodeBlock(language)
    qtbot.addWidget(block)
    block.resize(700, 400)
    block.set_code(code)
    block.show()
    qtbot.waitExposed(block)
    return block


# (language, code, (line, column) of a keyword, of a string, of a comment)
SAMPLES = {
    "python": ("def f(x):\n    return 'hi'  # note\n", (0, 0), (1, 11), (1, 19)),
    "ts": ("const x: string = \"hi\";\n// note\n", (0, 0), (0, 18), (1, 0)),
    "rust": ("fn main() {\n    let s = \"hi\"; // note\n}\n", (0, 0), (1, 12), (1, 19)),
    "bash": ("if true; then\n  echo 'hi'  # note\nfi\n", (0, 0), (1, 7), (1, 13)),
}


@pytest.mark.parametrize("language", list(SAMPLES))
def test_a_block_gets_keyword_string_and_comment_colours(qtbot: QtBot, language: str) -> None:
    code, keyword, string, comment = SAMPLES[language]
    block = shown_block(qtbot, language, code)
    # (Under load a paint's budget may end before the last line: the rest follows.)
    qtbot.waitUntil(lambda: block.text.highlighter is not None
                    and block.text.highlighter.tokens is not None
                    and block.text.highlighter.tokens.done > code.count("\n")
                    and color_at(block.text, *comment) is not None)
    assert color_at(block.text, *keyword) == expected(Keyword)
    assert color_at(block.text, *string) == expected(String)
    assert color_at(block.text, *comment) == expected(Comment)


def test_fence_aliases_and_file_names_pick_the_lexer(qtbot: QtBot) -> None:
    names = {"sh": "Bash", "shell": "Bash", "console": "Bash Session", "ts": "TypeScript",
             "py": "Python", "yml": "YAML", "jsonc": "JSON", "dockerfile": "Docker",
             "src/app.tsx": "TSX", "lib/main.rs": "Rust", "{.go}": "Go", "python title=x": "Python"}
    for fence, name in names.items():
        lexer = lexer_for_fence(fence)
        assert lexer is not None and lexer.name == name, fence
    block = shown_block(qtbot, "src/app.tsx", "export const App = () => <div>hi</div>;\n")
    assert block.label.text() == "src/app.tsx"
    highlighter = block.text.highlighter
    assert highlighter is not None and highlighter.lexer is not None
    assert highlighter.lexer.name == "TSX"
    qtbot.waitUntil(lambda: color_at(block.text, 0, 0) == expected(Keyword))


def test_windows_line_ends_keep_lines_and_colours_aligned(qtbot: QtBot) -> None:
    block = shown_block(qtbot, "python", "x = 1\r\nimport os\r\n")
    assert block.text.document().blockCount() == 3
    qtbot.waitUntil(lambda: color_at(block.text, 1, 0) == expected(Keyword))


def test_an_unknown_fence_is_plain_text(qtbot: QtBot) -> None:
    block = shown_block(qtbot, "no-such-language", "def f(x):\n    return 1\n")
    assert lexer_for_fence("no-such-language") is None
    qtbot.wait(50)
    block.text.repaint()
    assert block.text.highlighter is not None and block.text.highlighter.lexer is None
    assert coloured_lines(block.text) == []
    assert block.code() == "def f(x):\n    return 1\n"


def test_a_block_without_a_language_is_guessed_when_big_enough(qtbot: QtBot) -> None:
    rust = "use std::io;\n\nfn main() {\n    let mut x = 5;\n}\n"
    guessed = guess(rust)
    assert guessed is not None and guessed.name == "Rust"
    assert guess("fn main() {}") is None, "one line is too little to guess from"
    assert guess("Just some words\nover a few\nlines of prose\n") is None
    block = shown_block(qtbot, "", rust)
    assert block.label.text() == "code"
    qtbot.waitUntil(lambda: color_at(block.text, 2, 0) == expected(Keyword))


def scrolled_code(qtbot: QtBot, code: str, height: int = 400) -> tuple[QScrollArea, CodeText]:
    """A code text taller than its viewport, as in the transcript (which scrolls, not it)."""
    area = QScrollArea()
    qtbot.addWidget(area)
    area.resize(600, height)
    text = CodeText(language="python")
    text.set_text(code)
    area.setWidget(text)
    area.setWidgetResizable(True)
    area.show()
    qtbot.waitExposed(area)
    return area, text


def test_a_2000_line_block_lexes_only_what_is_painted(qtbot: QtBot) -> None:
    code = "".join(f"def f{n}(x):  # {n}\n    return 'x' * {n}\n" for n in range(1000))
    area, text = scrolled_code(qtbot, code)
    highlighter = text.highlighter
    assert highlighter is not None and highlighter.tokens is not None
    assert text.document().blockCount() == 2001
    visible = area.viewport().height() // text.fontMetrics().lineSpacing() + 2
    qtbot.waitUntil(lambda: 0 in coloured_lines(text))
    qtbot.wait(100)  # nothing more is lexed while nothing else is shown
    assert highlighter.tokens.lexed_count <= visible + 2
    assert highlighter.formatted_count <= visible + 2, "no line off screen was touched"
    assert max(coloured_lines(text)) <= visible
    # Scrolled to the middle: those lines are lexed (the lines above them too: a lexer's state
    # comes from its start), the end is not.
    area.verticalScrollBar().setValue(text.height() // 2)
    middle = 1000
    qtbot.waitUntil(lambda: middle + 5 in coloured_lines(text), timeout=10_000)
    qtbot.wait(100)
    assert highlighter.tokens.done < 1200
    assert [n for n in coloured_lines(text) if visible < n < 900] == []


def test_a_2000_line_block_seen_at_its_end_is_coloured_a_budget_at_a_time(
        qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    code = "".join(f"def f{n}(x):  # {n}\n    return 'x' * {n}\n" for n in range(1000))
    area, text = scrolled_code(qtbot, "")
    highlighter = text.highlighter
    assert highlighter is not None and highlighter.tokens is not None
    tokens = highlighter.tokens
    steps: list[int] = []
    ensure = tokens.ensure

    def counted(line: int, deadline: float | None = None) -> bool:
        before = tokens.done
        try:
            return ensure(line, deadline)
        finally:
            steps.append(tokens.done - before)

    monkeypatch.setattr(tokens, "ensure", counted)
    text.set_text(code)
    area.verticalScrollBar().setValue(area.verticalScrollBar().maximum())  # as the transcript
    qtbot.waitUntil(lambda: 1990 in coloured_lines(text), timeout=30_000)
    assert len([s for s in steps if s]) > 1 and max(steps) < 1000, \
        "the lines above the screen were lexed over several loop turns, none taking it all"


def test_streaming_growth_lexes_only_the_new_tail(qtbot: QtBot) -> None:
    LINES = 120
    # Every line in view: each is lexed as soon as it is painted.
    _area, text = scrolled_code(qtbot, "", height=2000)
    highlighter = text.highlighter
    assert highlighter is not None and highlighter.tokens is not None
    document = text.document()
    first = None
    code = ""
    for n in range(LINES):
        code += f"value_{n} = compute({n})  # line {n}\n"
        for piece in (code[:-12], code):  # a delta may end mid-line
            text.set_text(piece)
            text.viewport().update()
            QApplication.processEvents()  # one frame: what is in view is painted
        if first is None:
            first = document.firstBlock()
    assert document.firstBlock() == first, "the document grew; it was not rebuilt"
    lexed = highlighter.tokens.lexed_count
    # Each delta lexes the line it changed (and the empty one after a newline); lexing the
    # whole block each time would be LINES * LINES.
    assert lexed <= 3 * LINES, f"{lexed} lines lexed for {LINES} lines in {2 * LINES} deltas"
    last_comment = code.split("\n")[LINES - 1].index("#")
    qtbot.waitUntil(lambda: color_at(text, LINES - 1, last_comment) is not None)
    for line in (0, LINES // 2, LINES - 1):
        column = code.split("\n")[line].index("#")
        assert color_at(text, line, column) == expected(Comment), line


def shown_turn(qtbot: QtBot, *events: object) -> TurnView:
    """A turn of a shown transcript, with ``events`` applied."""
    view = TranscriptView()
    qtbot.addWidget(view)
    view.resize(700, 500)
    view.show()
    qtbot.waitExposed(view)
    turn = view.add_turn("show me", "Demo agent", SID)
    for event in events:
        turn.enqueue(event)  # type: ignore[arg-type]
    view.schedule(turn)
    view.flush_all()
    return turn


def test_theme_switch_changes_token_colours(qtbot: QtBot) -> None:
    turn = shown_turn(qtbot, TextDelta(SID, text="Here:\n\n```python\nimport os  # why\n```\n"))
    [block] = turn.code_blocks()
    qtbot.waitUntil(lambda: color_at(block.text, 0, 0) == expected(Keyword))
    light = color_at(block.text, 0, 0)
    theme.apply_theme("dark")  # live: the same widgets, no rebuild
    qtbot.waitUntil(lambda: color_at(block.text, 0, 0) == expected(Keyword))
    dark = color_at(block.text, 0, 0)
    assert light is not None and dark is not None and dark != light
    assert dark.lightness() > light.lightness(), "lighter tokens on the dark surface"
    assert color_at(block.text, 0, 11) == expected(Comment)


def test_diff_cards_colour_lines_and_the_code_in_them(qtbot: QtBot) -> None:
    edit = {"file_path": "src/reader.py", "old_string": "limit = 64\n",
            "new_string": "def limit():\n    return 'big'\n"}
    turn = shown_turn(qtbot, ToolStart(SID, tool_id="e1", name="Edit", input=edit))
    [card] = turn.tool_cards()
    assert card.expanded, "a small edit shows its diff at once"
    box = card._diff_box
    assert box is not None
    lines = box.toPlainText().split("\n")
    added_line = next(n for n, line in enumerate(lines) if line.startswith("+def"))
    removed_line = next(n for n, line in enumerate(lines) if line.startswith("-"))
    added_bg, removed_bg = theme.diff_colors()

    def background(line: int) -> QColor:
        """The colour at the right end of ``line``'s row, far past its text."""
        image = box.viewport().grab().toImage()
        row = box.blockBoundingGeometry(box.document().findBlockByNumber(line)).translated(
            box.contentOffset())
        return image.pixelColor(image.width() - 3, int(row.center().y()))

    qtbot.waitUntil(lambda: color_at(box, added_line, 1) == expected(Keyword)
                    and color_at(box, added_line + 1, 12) is not None)
    assert background(added_line) == added_bg, "the row is green across the whole view"
    assert background(removed_line) == removed_bg
    assert background(0) != added_bg and background(0) != removed_bg, "the hunk header"
    assert color_at(box, added_line + 1, 12) == expected(String)
    theme.apply_theme("dark")
    qtbot.waitUntil(lambda: background(removed_line) == theme.diff_colors()[1])
    qtbot.waitUntil(lambda: color_at(box, added_line, 1) == expected(Keyword))
