"""What an edit tool changes, as a unified diff with added and removed lines coloured.

Agents describe edits in a few shapes: Claude's ``Edit`` (``file_path``, ``old_string``,
``new_string``), ``MultiEdit`` (``edits``), ``Write`` (``file_path``, ``content``), and patch
text (Codex's ``apply_patch``, ACP diffs). ``edit_of`` turns any of them into (path, diff).
"""

from __future__ import annotations

import difflib

from PySide6.QtGui import QSyntaxHighlighter, QTextCharFormat, QTextDocument

from tolaria.ui import theme

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


class DiffHighlighter(QSyntaxHighlighter):
    """Added lines on green, removed on red, hunk headers muted; follows the theme."""

    def __init__(self, document: QTextDocument) -> None:
        super().__init__(document)
        self._formats: dict[str, QTextCharFormat] = {}
        self.restyle(rehighlight=False)

    def restyle(self, *, rehighlight: bool = True) -> None:
        added, removed = theme.diff_colors()
        self._formats = {"+": QTextCharFormat(), "-": QTextCharFormat(),
                         "@": QTextCharFormat()}
        self._formats["+"].setBackground(added)
        self._formats["-"].setBackground(removed)
        self._formats["@"].setForeground(theme.muted_text())
        if rehighlight:
            self.rehighlight()

    def highlightBlock(self, text: str) -> None:
        fmt = self._formats.get(text[:1])
        if fmt is not None:
            self.setFormat(0, len(text), fmt)
