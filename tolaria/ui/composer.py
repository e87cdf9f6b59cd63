"""The prompt editor: Enter sends, Shift+Enter starts a new line."""

from __future__ import annotations

import math
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit, QSizePolicy, QWidget

_MIN_LINES = 2
_MAX_LINES = 10


class Composer(QPlainTextEdit):
    #: The user pressed Enter (without Shift) to send what is typed.
    submit_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self.setAccessibleName("Message")
        self.setAccessibleDescription("Enter sends, Shift+Enter adds a line")
        self.setPlaceholderText("Message the agent… (Enter sends, Shift+Enter adds a line)")
        self.setTabChangesFocus(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._fit()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
                event.accept()
                return
            if not event.modifiers() & (Qt.KeyboardModifier.AltModifier
                                        | Qt.KeyboardModifier.MetaModifier):
                event.accept()
                self.submit_requested.emit()
                return
        super().keyPressEvent(event)

    def _fit(self, *_: Any) -> None:
        line = self.fontMetrics().lineSpacing()
        lines = min(_MAX_LINES, max(_MIN_LINES, math.ceil(self.document().size().height())))
        margins = self.contentsMargins()
        frame = int(self.document().documentMargin() * 2) + margins.top() + margins.bottom()
        self.setFixedHeight(lines * line + frame + 4)
