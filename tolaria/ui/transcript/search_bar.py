"""Find in the chat (Ctrl+F): a slim bar over the transcript.

The search runs in the store (``Store.search_turns``), not over widgets: most turns of a long
chat have none. The bar says what to look for, keeps the matching turns the store answered and
steps through them; a match outside the transcript's window is asked for (``jump_requested``)
and the pane loads its page.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QLineEdit, QToolButton, QWidget

from tolaria.ui import theme
from tolaria.ui.transcript.view import TranscriptView


class SearchBar(QFrame):
    #: Look for this text in the chat: text.
    search_requested = Signal(str)
    #: Show the page around this matching turn (it is not in the window): turn id.
    jump_requested = Signal(int)
    #: The bar was closed.
    closed = Signal()

    def __init__(self, transcript: TranscriptView, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._transcript = transcript
        self._needle = ""
        self._matches: list[int] = []
        self._match = -1
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
        self.field.installEventFilter(self)
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
        button.clicked.connect(lambda: self.step(step))
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
        self._transcript.set_needle("")
        self.closed.emit()

    def show_matches(self, text: str, turn_ids: Sequence[int]) -> None:
        """The store's answer (oldest first): go to the newest match."""
        self._needle, self._matches = text, list(turn_ids)
        self._match = len(self._matches) - 1
        self._show_match()

    def step(self, step: int) -> None:
        """The next (+1, newer) or previous (-1, older) match."""
        if self._matches:
            self._match = (self._match + step) % len(self._matches)
            self._show_match()

    def _show_match(self) -> None:
        total = len(self._matches)
        self.count.setText(f"{self._match + 1} of {total}" if total else "No matches")
        if not self._matches:
            return
        turn_id = self._matches[self._match]
        self._transcript.set_needle(self._needle)
        if not self._transcript.scroll_to_turn(turn_id):
            self.jump_requested.emit(turn_id)

    def _on_field_return_pressed(self) -> None:
        text = self.field.text()
        if text != self._searched:
            self._searched = text
            self._matches, self._match = [], -1
            self.search_requested.emit(text)
        else:
            self.step(-1)  # Enter again: the match before (older)

    def _on_field_text_changed(self, _text: str) -> None:
        self.count.setText("")

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        # Esc belongs to the find field while it has the focus (not to the window's Stop).
        if (watched is self.field and event.type() == QEvent.Type.ShortcutOverride
                and isinstance(event, QKeyEvent) and event.key() == Qt.Key.Key_Escape):
            event.accept()
            return True
        return super().eventFilter(watched, event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.dismiss()
            return
        super().keyPressEvent(event)
