"""Pygments tokens as Qt formats on a code document, for the lines on screen only.

Qt's ``QSyntaxHighlighter`` calls ``highlightBlock`` for every block that changed, eagerly (all
2,000 lines of a new block at once). Here that call only applies tokens that are already
lexed; lexing happens when a view is about to paint lines (``show_lines``: what is on screen,
within a time budget, the rest continued on later loop turns). A theme switch only bumps a
generation: each line gets its new colours when it is painted next, never the whole block at
once.
"""

from __future__ import annotations

import time

from pygments.lexer import Lexer
from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QSyntaxHighlighter, QTextCharFormat, QTextDocument

from tolaria.ui.transcript.syntax import colors
from tolaria.ui.transcript.syntax.lexers import guess, lexer_for_fence
from tolaria.ui.transcript.syntax.lines import LineTokens

#: Milliseconds of lexing per paint, and per later loop turn while lines on screen wait.
BUDGET_MS = 4.0
#: Line counts at which a block whose fence names no language is guessed (while it grows).
GUESS_AT = (3, 12, 40)


class CodeHighlighter(QSyntaxHighlighter):
    """Colours a code document by its language (a fence's info string; "" guesses)."""

    #: Lines on screen got lexed after the paint that asked for them: paint again.
    progressed = Signal()

    def __init__(self, document: QTextDocument, language: str = "") -> None:
        self.language = language
        lexer = lexer_for_fence(language) if language else None
        self._guessing = not language
        self._guessed_at = 0
        self.tokens: LineTokens | None = LineTokens(lexer) if lexer is not None else None
        self._dark = colors.dark_theme()
        self._generation = 0
        #: Line -> the generation its formats were applied in.
        self._applied: dict[int, int] = {}
        self._wanted: tuple[int, int] | None = None
        super().__init__(document)
        self._more = QTimer(self)
        self._more.setSingleShot(True)
        self._more.setInterval(0)
        self._more.timeout.connect(self._on_more_timeout)

    @property
    def lexer(self) -> Lexer | None:
        return self.tokens.lexer if self.tokens is not None else None

    # -- the text ------------------------------------------------------------------------------
    def prepare(self, text: str) -> None:
        """The document is about to hold ``text`` (call before changing it)."""
        if self._guessing and self.tokens is None:
            lines = text.count("\n") + 1
            due = [n for n in GUESS_AT if self._guessed_at < n <= lines]
            if due:
                self._guessed_at = due[-1]
                lexer = guess(text)
                if lexer is not None:
                    self.tokens = LineTokens(lexer)
                    self._applied.clear()
        if self.tokens is not None:
            self.tokens.set_text(self.code_of(text))

    def code_of(self, text: str) -> str:
        """What is lexed of the document's text (a diff strips its +/- column)."""
        return text

    def line_code(self, line: str) -> str:
        return line

    #: Columns before a line's code (a diff's +/- column).
    column_offset = 0

    # -- painting ------------------------------------------------------------------------------
    def show_lines(self, first: int, last: int) -> None:
        """Lines ``first``..``last`` are about to be painted: lex them (within the budget) and
        give those that lack them their current colours."""
        if self.tokens is None:
            return
        self._wanted = (first, last)
        deadline = time.perf_counter() + BUDGET_MS / 1000
        reached = self.tokens.ensure(last, deadline)
        document = self.document()
        top = min(last, self.tokens.done - 1)
        for line in range(max(0, first), top + 1):
            if self._applied.get(line) != self._generation:
                block = document.findBlockByNumber(line)
                if block.isValid():
                    self.rehighlightBlock(block)
        if not reached:
            self._more.start()

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

    # -- Qt's call, for each changed block -----------------------------------------------------
    def highlightBlock(self, text: str) -> None:
        self.decorate(text)
        tokens = self.tokens
        line = self.currentBlock().blockNumber()
        if tokens is None or line >= tokens.done or tokens.line_text(line) != \
                self.line_code(text):
            self._applied.pop(line, None)
            return
        dark, offset = self._dark, self.column_offset
        for column, length, ttype in tokens.lines[line]:
            fmt = colors.token_format(ttype, dark)
            if fmt is not None:
                self.setFormat(column + offset, length, self.merged(fmt))
        self._applied[line] = self._generation

    def decorate(self, text: str) -> None:
        """Formats of the whole line under the tokens' (a diff's line backgrounds)."""

    def merged(self, fmt: QTextCharFormat) -> QTextCharFormat:
        return fmt
