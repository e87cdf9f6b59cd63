"""What an edit tool changes, as a unified diff with added and removed lines coloured.

Agents describe edits in a few shapes: Claude's ``Edit`` (``file_path``, ``old_string``,
``new_string``), ``MultiEdit`` (``edits``), ``Write`` (``file_path``, ``content``), and patch
text (Codex's ``apply_patch``, ACP diffs). ``edit_of`` turns any of them into (path, diff).
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QTextCharFormat, QTextDocument, QTextLayout

from tolaria.core.tool_edits import MAX_DIFF_LINES, edit_of  # re-exported
from tolaria.ui import theme
from tolaria.ui.transcript.syntax.highlighter import CodeHighlighter
from tolaria.ui.transcript.syntax.lexers import lexer_for_path
from tolaria.ui.transcript.syntax.lines import LineTokens

__all__ = ["MAX_DIFF_LINES", "DiffHighlighter", "edit_of"]


class DiffHighlighter(CodeHighlighter):
    """Added lines on green, removed on red (the whole row, as wide as the view), hunk headers
    muted; the code in them coloured by the file's language (its extension) when it has one;
    follows the theme."""

    column_offset = 1
    has_rows = True

    def __init__(self, document: QTextDocument, path: str = "") -> None:
        super().__init__(document, "text")
        lexer = lexer_for_path(path) if path else None
        self.tokens = LineTokens(lexer) if lexer is not None else None

    def row_color(self, text: str) -> QColor | None:
        marker = text[:1]
        if marker not in ("+", "-"):
            return None
        added, removed = theme.diff_colors()
        return added if marker == "+" else removed

    def code_of(self, text: str) -> str:
        return "\n".join(self.line_code(line) for line in text.split("\n"))

    def line_code(self, line: str) -> str:
        return line[1:] if line[:1] in ("+", "-", " ") else ""

    def decorate(self, text: str) -> list[QTextLayout.FormatRange]:
        if not text.startswith("@"):
            return []
        muted = QTextCharFormat()
        muted.setForeground(theme.muted_text())
        span = QTextLayout.FormatRange()
        span.start, span.length, span.format = 0, len(text), muted
        return [span]
