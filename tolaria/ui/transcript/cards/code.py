"""A fenced code block: language label, Copy, and its lines never wrapped nor clipped.

Long lines scroll horizontally inside the block (Shift+wheel, a touchpad's sideways swipe, or
the thin scroll bar); the vertical wheel goes on scrolling the transcript. The block is exactly
as tall as its lines, so the transcript is the only vertical scroller.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QRect, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import (
    QGuiApplication,
    QPainter,
    QPaintEvent,
    QPalette,
    QTextCursor,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from tolaria.ui import theme
from tolaria.ui.transcript.cards.style import Surface, set_tone, small_font, thin_scrollbar_css
from tolaria.ui.transcript.syntax.highlighter import CodeHighlighter


class CodeText(QPlainTextEdit):
    """Read-only, unwrapped text as tall as its lines; scrolls sideways only.

    With a ``language`` ("" guesses one) its lines are coloured by Pygments, only those that
    are painted (tolaria/ui/transcript/syntax/highlighter.py); text that only grew at its end
    is appended, so a streaming block is neither rebuilt nor lexed again from its start."""

    def __init__(self, parent: QWidget | None = None, *, language: str | None = None,
                 max_lines: int | None = None) -> None:
        super().__init__(parent)
        #: Lines shown before the text scrolls up and down inside itself (None: never).
        self.max_lines = max_lines
        self.setReadOnly(True)
        self.setUndoRedoEnabled(False)  # appended text keeps no undo history
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.setFont(theme.mono_font())
        self.document().setDocumentMargin(8)
        # On the card's own surface: no base colour of its own.
        self.viewport().setAutoFillBackground(False)
        palette = self.palette()
        palette.setColor(QPalette.ColorRole.Base, Qt.GlobalColor.transparent)
        self.setPalette(palette)
        self._text = ""
        self.highlighter: CodeHighlighter | None = None
        if language is not None:
            self.set_highlighter(CodeHighlighter(self.document(), language))
        self.horizontalScrollBar().rangeChanged.connect(self._fit)
        self.restyle()
        self._fit()

    def restyle(self) -> None:
        """Colours of the current theme: the scroll bar's, the highlighting's."""
        self.horizontalScrollBar().setStyleSheet(thin_scrollbar_css(Qt.Orientation.Horizontal))
        if self.highlighter is not None:
            self.highlighter.restyle()

    def set_highlighter(self, highlighter: CodeHighlighter) -> None:
        """Colour the text with ``highlighter`` (made on this widget's document)."""
        self.highlighter = highlighter
        highlighter.progressed.connect(self.viewport().update)
        highlighter.prepare(self._text, "")

    def set_text(self, text: str) -> None:
        # Qt starts a new block at a "\r" as at a "\n": the highlighter's lines must be its.
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        old = self._text
        if text == old:
            return
        self._text = text
        if self.highlighter is not None:
            self.highlighter.prepare(text, old)
        if old and text.startswith(old):
            cursor = QTextCursor(self.document())
            cursor.movePosition(QTextCursor.MoveOperation.End)
            cursor.insertText(text[len(old):])
        else:
            self.setPlainText(text)
        self._fit()

    def paintEvent(self, event: QPaintEvent) -> None:
        if self.highlighter is not None:
            first, last = self.visible_lines(event.rect())
            self.highlighter.show_lines(first, last)
            if self.highlighter.has_rows:
                self._paint_rows(first, last)
        super().paintEvent(event)

    def _paint_rows(self, first: int, last: int) -> None:
        """Row colours under the lines (a diff's added and removed lines), as wide as the view
        whatever the line's length."""
        assert self.highlighter is not None
        block = self.document().findBlockByNumber(first)
        offset = self.contentOffset()
        width = self.viewport().width()
        painter: QPainter | None = None
        line = first
        while block.isValid() and line <= last:
            color = self.highlighter.row_color(block.text())
            if color is not None:
                row = self.blockBoundingGeometry(block).translated(offset)
                height = row.height()  # (the last block's also holds the bottom margin)
                layout = block.layout()
                if layout.lineCount() == 1:
                    height = min(height, layout.lineAt(0).height())
                painter = painter or QPainter(self.viewport())
                painter.fillRect(QRectF(0, row.top(), width, height), color)
            block = block.next()
            line += 1
        if painter is not None:
            painter.end()

    def visible_lines(self, rect: QRect) -> tuple[int, int]:
        """(first, last) line that ``rect`` of the viewport shows (every line is one line
        high: nothing wraps)."""
        block = self.firstVisibleBlock()
        top = self.blockBoundingGeometry(block).translated(self.contentOffset()).top()
        step = max(1, self.fontMetrics().lineSpacing())
        first = block.blockNumber() + max(0, math.floor((rect.top() - top) / step))
        last = block.blockNumber() + max(0, math.ceil((rect.bottom() - top) / step))
        return first, last

    def _fit(self, *_: int) -> None:
        lines = max(1, self.document().blockCount())
        capped = self.max_lines is not None and lines > self.max_lines
        if capped and self.max_lines is not None:
            lines = self.max_lines
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded if capped
                                        else Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        height = math.ceil(lines * self.fontMetrics().lineSpacing()
                           + 2 * self.document().documentMargin()) + 2 * self.frameWidth() + 2
        bar = self.horizontalScrollBar()
        if bar.maximum() > 0:  # a line longer than the block: room for the scroll bar
            height += bar.sizeHint().height()
        if height != self.height():
            self.setFixedHeight(height)

    def wheelEvent(self, event: QWheelEvent) -> None:
        delta = event.angleDelta()
        bar = self.verticalScrollBar()
        inner = bar.maximum() > 0 and (
            (delta.y() > 0 and bar.value() > 0) or (delta.y() < 0 and bar.value() < bar.maximum()))
        if abs(delta.x()) > abs(delta.y()) or inner or (
                event.modifiers() & Qt.KeyboardModifier.ShiftModifier):
            super().wheelEvent(event)  # sideways, or a capped box with more to show
        else:
            event.ignore()  # up and down: the transcript scrolls


class _Header(QFrame):
    """The block's header row, with a rule under it."""

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setPen(theme.derived("border", theme.border))
        painter.drawLine(1, self.height() - 1, self.width() - 2, self.height() - 1)
        painter.end()
        super().paintEvent(event)


class CodeBlock(Surface):
    """One fenced block of an answer, with its language and a Copy button."""

    #: The user copied the block's text (the transcript shows a short "Copied").
    copied = Signal()

    def __init__(self, language: str, parent: QWidget | None = None) -> None:
        super().__init__("code", parent)
        self.setObjectName("codeBlock")
        self.language = language
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        header = _Header(self)
        header.setObjectName("codeHeader")
        row = QHBoxLayout(header)
        row.setContentsMargins(10, 2, 4, 2)
        self.label = QLabel(language or "code", header)
        self.label.setObjectName("codeLanguage")
        self.label.setFont(small_font(self.label))
        set_tone(self.label, "muted")
        row.addWidget(self.label)
        row.addStretch(1)
        self.copy_button = QToolButton(header)
        self.copy_button.setObjectName("copyCode")
        self.copy_button.setText("Copy")
        self.copy_button.setAccessibleName(f"Copy {language or 'code'}")
        self.copy_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.copy_button.setAutoRaise(True)
        set_tone(self.copy_button, "muted")
        self.copy_button.clicked.connect(self._on_copy_button_clicked)
        row.addWidget(self.copy_button)
        layout.addWidget(header)
        self.text = CodeText(self, language=language)
        self.text.setObjectName("codeText")
        layout.addWidget(self.text)

    def set_code(self, code: str) -> None:
        self.text.set_text(code)

    def code(self) -> str:
        return self.text.toPlainText()

    def restyle(self) -> None:
        self.text.restyle()

    def _on_copy_button_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self.code())
        self.copy_button.setText("Copied")
        QTimer.singleShot(1500, self, self._on_copied_timeout)
        self.copied.emit()

    def _on_copied_timeout(self) -> None:
        self.copy_button.setText("Copy")
