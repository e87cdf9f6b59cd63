"""What an edit tool changes, as a unified diff with added and removed lines coloured.

Agents describe edits in a few shapes: Claude's ``Edit`` (``file_path``, ``old_string``,
``new_string``), ``MultiEdit`` (``edits``), ``Write`` (``file_path``, ``content``), and patch
text (Codex's ``apply_patch``, ACP diffs). ``edit_of`` turns any of them into (path, diff).
"""

from __future__ import annotations

from PySide6.QtGui import QSyntaxHighlighter, QTextCharFormat, QTextDocument

from tolaria.core.tool_edits import MAX_DIFF_LINES, edit_of  # re-exported
from tolaria.ui import theme

__all__ = ["MAX_DIFF_LINES", "DiffHighlighter", "edit_of"]


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
