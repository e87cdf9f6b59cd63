"""A fenced code block: language label, Copy, and its lines never wrapped nor clipped.

Long lines scroll horizontally inside the block (Shift+wheel, a touchpad's sideways swipe, or
the thin scroll bar); the vertical wheel goes on scrolling the transcript. The block is exactly
as tall as its lines, so the transcript is the only vertical scroller.
"""

from __future__ import annotations

import math

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QPainter, QPaintEvent, QPalette, QWheelEvent
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
from tolaria.ui.transcript.markdown import CodeHighlighter


class CodeText(QPlainTextEdit):
    """Read-only, unwrapped text as tall as its lines; scrolls sideways only."""

    def __init__(self, parent: QWidget | None = None, *, language: str | None = None,
                 max_lines: int | None = None) -> None:
        super().__init__(parent)
        #: Lines shown before the text scrolls up and down inside itself (None: never).
        self.max_lines = max_lines
        self.setReadOnly(True)
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
        self.highlighter = CodeHighlighter(self.document(), language) if language is not None \
            else None
        self.horizontalScrollBar().rangeChanged.connect(self._fit)
        self.restyle()
        self._fit()

    def restyle(self) -> None:
        """Colours of the current theme: the scroll bar's, the highlighting's."""
        self.horizontalScrollBar().setStyleSheet(thin_scrollbar_css(Qt.Orientation.Horizontal))
        if self.highlighter is not None:
            self.highlighter.restyle()

    def set_text(self, text: str) -> None:
        if text != self.toPlainText():
            self.setPlainText(text)
            self._fit()

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
        painter.setPen(theme.border())
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
