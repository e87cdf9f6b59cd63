"""The prompt editor: Enter sends, Shift+Enter starts a new line."""

from __future__ import annotations

import math
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit, QSizePolicy, QWidget

_MIN_LINES = 2
_MAX_LINES = 10


_HINTS = {"Enter": "Enter sends, Shift+Enter adds a line",
          "Ctrl+Enter": "Ctrl+Enter sends, Enter adds a line"}


class Composer(QPlainTextEdit):
    #: The user pressed the send key (Enter, or Ctrl+Enter when so configured).
    submit_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self.setAccessibleName("Message")
        self._ctrl_enter_sends = False
        self.set_send_key("Enter")
        self.setTabChangesFocus(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._fit()

    def set_send_key(self, key: str) -> None:
        """``"Enter"`` or ``"Ctrl+Enter"`` sends (``[shortcuts] send``); the other adds a line."""
        self._ctrl_enter_sends = key == "Ctrl+Enter"
        hint = _HINTS["Ctrl+Enter" if self._ctrl_enter_sends else "Enter"]
        self.setAccessibleDescription(hint)
        self.setPlaceholderText(f"Message the agent… ({hint})")

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            ctrl = bool(event.modifiers() & Qt.KeyboardModifier.ControlModifier)
            if self._ctrl_enter_sends and not ctrl:
                self.insertPlainText("\n")
                event.accept()
                return
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
