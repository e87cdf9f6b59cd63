"""Mentions in the composer read as chips: the accent colour on a tinted background.

A token is painted only when it names a path of the chat's folder (or one the picker inserted),
so ``a@b.com`` and ``@someone`` stay plain text.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QFont, QSyntaxHighlighter, QTextCharFormat, QTextDocument

from tolaria.chats.mentions.forms import MENTION_RE
from tolaria.ui import theme


class MentionHighlighter(QSyntaxHighlighter):
    def __init__(self, document: QTextDocument, is_mention: Callable[[str], bool]) -> None:
        super().__init__(document)
        self._is_mention = is_mention

    def chip_format(self) -> QTextCharFormat:
        fmt = QTextCharFormat()
        fmt.setForeground(theme.accent())
        fmt.setBackground(theme.mix(theme.base(), theme.accent(), 0.16))
        fmt.setFontWeight(QFont.Weight.DemiBold)
        return fmt

    def highlightBlock(self, text: str) -> None:
        if "@" not in text:
            return
        fmt = self.chip_format()
        for m in MENTION_RE.finditer(text):
            path = m.group(1) or m.group(2) or ""
            if path and self._is_mention(path):
                self.setFormat(m.start(), m.end() - m.start(), fmt)
