"""What an edit tool changes, as a unified diff with added and removed lines coloured.

Agents describe edits in a few shapes: Claude's ``Edit`` (``file_path``, ``old_string``,
``new_string``), ``MultiEdit`` (``edits``), ``Write`` (``file_path``, ``content``), and patch
text (Codex's ``apply_patch``, ACP diffs). ``edit_of`` turns any of them into (path, diff).
"""

from __future__ import annotations

import difflib

from PySide6.QtGui import QColor, QTextCharFormat, QTextDocument, QTextLayout

from tolaria.ui import theme
from tolaria.ui.transcript.syntax.highlighter import CodeHighlighter
from tolaria.ui.transcript.syntax.lexers import lexer_for_path
from tolaria.ui.transcript.syntax.lines import LineTokens

#: Lines of a diff shown at most (the rest is counted, the store keeps the tool input).
MAX_DIFF_LINES = 400


def _unified(old: str, new: str) -> list[str]:
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=2)
    return [line for line in lines if not line.startswith(("---", "+++"))]


def edit_of(tool_input: object) -> tuple[str, str] | None:
    """(file path, diff text) when ``tool_input`` describes a file edit; None otherwise."""
    if not isinstance(tool_input, dict):
        return None
    path = tool_input.get("file_path") or tool_input.get("path") or tool_input.get("filename")
    path = path if isinstance(path, str) else ""
    lines: list[str] = []
    if isinstance(tool_input.get("old_string"), str) and isinstance(
            tool_input.get("new_string"), str):
        lines = _unified(tool_input["old_string"], tool_input["new_string"])
    elif isinstance(tool_input.get("edits"), list):
        for edit in tool_input["edits"]:
            if isinstance(edit, dict) and isinstance(edit.get("old_string"), str) \
                    and isinstance(edit.get("new_string"), str):
                lines += _unified(edit["old_string"], edit["new_string"])
    elif path and isinstance(tool_input.get("content"), str):
        lines = ["@@ new file @@", *("+" + line for line in tool_input["content"].splitlines())]
    else:
        for key in ("patch", "diff", "input"):
            value = tool_input.get(key)
            if isinstance(value, str) and ("\n+" in value or "\n-" in value):
                lines = value.splitlines()
                break
    if not lines:
        return None
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"… {len(lines) - MAX_DIFF_LINES} more lines"]
    return path, "\n".join(lines)


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
