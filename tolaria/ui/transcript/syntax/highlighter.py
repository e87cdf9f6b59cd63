"""Pygments tokens as Qt formats on a code document, for the lines on screen only.

Nothing here runs per changed block: Qt's ``QSyntaxHighlighter`` would call Python for every
line of a new 2,000-line block at once (a third more than building the block itself). Instead a
view calls ``show_lines`` with the lines it is about to paint: they are lexed (within a time
budget, the rest continued on later loop turns) and their formats set on their layouts, as
``QSyntaxHighlighter`` itself does (``QTextLayout.setFormats`` and ``markContentsDirty``). A
line remembers the generation its formats were made in; a theme switch or new text bumps it, so
each line gets its new colours when it is painted next, never the whole block at once.
"""

from __future__ import annotations

import time

from pygments.lexer import Lexer
from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QColor, QTextBlock, QTextCharFormat, QTextDocument, QTextLayout

from tolaria.ui.transcript.syntax import colors
from tolaria.ui.transcript.syntax.lexers import guess, lexer_for_fence
from tolaria.ui.transcript.syntax.lines import LineTokens

#: Milliseconds of lexing per paint, and per later loop turn while lines on screen wait.
BUDGET_MS = 4.0
#: Line counts at which a block whose fence names no language is guessed (while it grows).
GUESS_AT = (3, 12, 40)


class CodeHighlighter(QObject):
    """Colours a code document by its language (a fence's info string; "" guesses)."""

    #: Lines on screen got lexed after the paint that asked for them: paint again.
    progressed = Signal()
    #: Columns before a line's code (a diff's +/- column).
    column_offset = 0
    #: Whether lines have a row colour (``row_color``) painted under them.
    has_rows = False

    def __init__(self, document: QTextDocument, language: str = "") -> None:
        super().__init__(document)
        self._document = document
        self.language = language
        lexer = lexer_for_fence(language) if language else None
        self._guessing = not language
        self._guessed_at = 0
        self.tokens: LineTokens | None = LineTokens(lexer) if lexer is not None else None
        self._dark = colors.dark_theme()
        self._generation = 0
        #: Line -> the generation its formats were made in (absent: none, or stale ones).
        self._applied: dict[int, int] = {}
        #: Lines whose formats were set (by ``show_lines``) since the block was last filled.
        self.formatted_count = 0
        self._wanted: tuple[int, int] | None = None
        self._more = QTimer(self)
        self._more.setSingleShot(True)
        self._more.setInterval(0)
        self._more.timeout.connect(self._on_more_timeout)

    def document(self) -> QTextDocument:
        return self._document

    @property
    def lexer(self) -> Lexer | None:
        return self.tokens.lexer if self.tokens is not None else None

    # -- the text ------------------------------------------------------------------------------
    def prepare(self, text: str, old: str) -> None:
        """The document is about to hold ``text`` instead of ``old`` (call before changing it;
        text that starts with ``old`` is appended)."""
        if self._guessing and self.tokens is None:
            lines = text.count("\n") + 1
            due = [n for n in GUESS_AT if self._guessed_at < n <= lines]
            if due:
                self._guessed_at = due[-1]
                lexer = guess(text)
                if lexer is not None:
                    self.tokens = LineTokens(lexer)
                    self._applied.clear()
        if old and text.startswith(old):
            changed = old.count("\n")  # the old last line may go on
            for line in [n for n in self._applied if n >= changed]:
                del self._applied[line]
        else:
            self._applied.clear()
        if self.tokens is not None:
            self.tokens.set_text(self.code_of(text))

    def code_of(self, text: str) -> str:
        """What is lexed of the document's text (a diff strips its +/- column)."""
        return text

    def line_code(self, line: str) -> str:
        return line

    # -- painting ------------------------------------------------------------------------------
    def show_lines(self, first: int, last: int) -> None:
        """Lines ``first``..``last`` are about to be painted: lex them (within the budget) and
        give those that lack them their current colours."""
        document = self._document
        last = min(last, document.blockCount() - 1)
        if last < first:
            return
        self._wanted = (first, last)
        reached = True
        if self.tokens is not None:
            reached = self.tokens.ensure(last, time.perf_counter() + BUDGET_MS / 1000)
        generation = self._generation
        applied = self._applied
        block = document.findBlockByNumber(first)
        line = first
        dirty: list[int] = []  # (one relayout for all the lines given formats, not one each)
        while block.isValid() and line <= last:
            if applied.get(line) != generation and self._format(block, line):
                dirty += [block.position(), block.position() + block.length()]
            block = block.next()
            line += 1
        if dirty:
            document.markContentsDirty(dirty[0], dirty[-1] - dirty[0])
        if not reached:
            self._more.start()

    def _format(self, block: QTextBlock, line: int) -> bool:
        """Set ``block``'s formats; True when they changed (its layout must be redone)."""
        text = block.text()
        ranges = self.decorate(text)
        tokens = self.tokens
        lexed = tokens is None or (line < tokens.done and tokens.line_text(line)
                                   == self.line_code(text))
        if tokens is not None and lexed:
            dark, offset = self._dark, self.column_offset
            for column, length, ttype in tokens.lines[line]:
                fmt = colors.token_format(ttype, dark)
                if fmt is not None:
                    ranges.append(_range(column + offset, length, self.merged(fmt)))
        if lexed:
            self._applied[line] = self._generation
        layout = block.layout()
        if ranges or layout.formats():
            layout.setFormats(ranges)
            self.formatted_count += 1
            return True
        return False

    def _on_more_timeout(self) -> None:
        if self.tokens is None or self._wanted is None:
            return
        first, last = self._wanted
        before = self.tokens.done
        reached = self.tokens.ensure(last, time.perf_counter() + BUDGET_MS / 1000)
        if self.tokens.done > first and self.tokens.done > before:
            self.progressed.emit()
        if not reached:
            self._more.start()

    def restyle(self) -> None:
        """Colours of the current theme (each line takes them when it is painted next)."""
        dark = colors.dark_theme()
        if dark != self._dark:
            self._dark = dark
            self._generation += 1
            self.progressed.emit()

    def decorate(self, text: str) -> list[QTextLayout.FormatRange]:
        """Formats of the whole line under the tokens' (a diff's line backgrounds)."""
        return []

    def merged(self, fmt: QTextCharFormat) -> QTextCharFormat:
        return fmt

    def row_color(self, text: str) -> QColor | None:
        """The colour of the row under a line, across the whole view (None: none)."""
        return None


def _range(start: int, length: int, fmt: QTextCharFormat) -> QTextLayout.FormatRange:
    span = QTextLayout.FormatRange()
    span.start, span.length, span.format = start, length, fmt
    return span
