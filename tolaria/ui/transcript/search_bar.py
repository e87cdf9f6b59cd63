"""Find in the chat (Ctrl+F): a slim bar over the transcript.

The search runs in the store (``Store.search_turns``), not over widgets: most turns of a long
chat have none. The bar only says what to look for and steps through the matching turns; the
pane loads the page of the current match.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QLineEdit, QToolButton, QWidget

from tolaria.ui import theme


class SearchBar(QFrame):
    #: Look for this text in the chat: text.
    search_requested = Signal(str)
    #: Go to the next (+1) or previous (-1) match.
    step_requested = Signal(int)
    #: The bar was closed.
    closed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("searchBar")
        row = QHBoxLayout(self)
        row.setContentsMargins(12, 4, 12, 4)
        row.setSpacing(6)
        self.field = QLineEdit(self)
        self.field.setObjectName("searchField")
        self.field.setPlaceholderText("Find in this chat")
        self.field.setAccessibleName("Find in this chat")
        self.field.setClearButtonEnabled(True)
        self.field.returnPressed.connect(self._on_field_return_pressed)
        self.field.textChanged.connect(self._on_field_text_changed)
        row.addWidget(self.field, 1)
        self.count = QLabel(self)
        self.count.setObjectName("searchCount")
        row.addWidget(self.count)
        self.previous = self._button("↑", "Previous match (Shift+Enter)", -1)
        self.next = self._button("↓", "Next match (Enter)", 1)
        row.addWidget(self.previous)
        row.addWidget(self.next)
        close = QToolButton(self)
        close.setText("✕")
        close.setAutoRaise(True)
        close.setAccessibleName("Close find")
        close.clicked.connect(self.dismiss)
        row.addWidget(close)
        self._searched = ""
        self.restyle()
        self.hide()

    def _button(self, text: str, tip: str, step: int) -> QToolButton:
        button = QToolButton(self)
        button.setText(text)
        button.setAutoRaise(True)
        button.setToolTip(tip)
        button.setAccessibleName(tip.split(" (")[0])
        button.clicked.connect(lambda: self.step_requested.emit(step))
        return button

    def restyle(self) -> None:
        self.setStyleSheet(
            f"QFrame#searchBar {{ background: {theme.css(theme.card_background())};"
            f" border-bottom: 1px solid {theme.css(theme.border())}; }}"
            f" QLabel#searchCount {{ color: {theme.css(theme.muted_text())}; }}")

    def open(self) -> None:
        self.show()
        self.field.setFocus()
        self.field.selectAll()

    def dismiss(self) -> None:
        self.hide()
        self.closed.emit()

    def show_count(self, index: int, total: int) -> None:
        self.count.setText(f"{index + 1} of {total}" if total else "No matches")

    def _on_field_return_pressed(self) -> None:
        text = self.field.text()
        if text != self._searched:
            self._searched = text
            self.search_requested.emit(text)
        else:
            self.step_requested.emit(-1)  # Enter again: the match before (older)

    def _on_field_text_changed(self, _text: str) -> None:
        self.count.setText("")

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.dismiss()
            return
        super().keyPressEvent(event)
