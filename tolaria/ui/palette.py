"""The command palette (Ctrl+K): every window action with its shortcut, a fuzzy filter, Enter runs.

A popup, like Zed's and VS Code's: typing narrows the list, Up/Down move, Enter runs the action
after the popup has closed (so the action sees the keyboard free), Esc or a click outside closes
it. Disabled actions are listed greyed, so the palette also says what cannot be done right now.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QAction, QKeyEvent
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QVBoxLayout,
    QWidget,
)

from tolaria.ui import theme
from tolaria.ui.actions import plain_text, shortcut_text

_ACTION_ROLE = Qt.ItemDataRole.UserRole


def fuzzy_score(query: str, text: str) -> int | None:
    """``None`` unless every character of ``query`` appears in ``text`` in order; higher is a
    better match (consecutive characters and word starts count more, as in editors' palettes)."""
    query = query.lower().replace(" ", "")
    text_l = text.lower()
    if not query:
        return 0
    score = 0
    position = -1
    previous = -2
    for char in query:
        found = text_l.find(char, position + 1)
        if found < 0:
            return None
        score += 1
        if found == previous + 1:
            score += 3
        if found == 0 or not text_l[found - 1].isalnum():
            score += 2
        previous = position = found
    return score - len(text_l) // 20


class CommandPalette(QFrame):
    """A popup listing ``actions``; runs the chosen one."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        self.setObjectName("commandPalette")
        self.setAccessibleName("Command palette")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(6)
        self.field = QLineEdit(self)
        self.field.setObjectName("paletteField")
        self.field.setAccessibleName("Type a command")
        self.field.setPlaceholderText("Type a command…")
        self.field.textChanged.connect(self._on_field_text_changed)
        self.field.installEventFilter(self)
        layout.addWidget(self.field)
        self.list = QListWidget(self)
        self.list.setObjectName("paletteList")
        self.list.setAccessibleName("Commands")
        self.list.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.list.itemActivated.connect(self._on_list_item_activated)
        self.list.itemClicked.connect(self._on_list_item_activated)
        layout.addWidget(self.list, 1)
        self.empty = QLabel("No command matches.", self)
        self.empty.setObjectName("paletteEmpty")
        self.empty.setStyleSheet(f"color: {theme.css(theme.muted_text())};")
        self.empty.hide()
        layout.addWidget(self.empty)
        self._actions: list[QAction] = []

    def open_with(self, actions: Sequence[QAction]) -> None:
        """Show the palette over the top of the parent window, listing ``actions``."""
        self._actions = [a for a in actions if a.isVisible()]
        self.field.blockSignals(True)
        self.field.clear()
        self.field.blockSignals(False)
        self._fill("")
        parent = self.parentWidget()
        assert parent is not None
        width = min(560, max(360, parent.width() - 80))
        self.resize(width, 380)
        top_left = parent.mapToGlobal(parent.rect().topLeft())
        self.move(top_left.x() + (parent.width() - width) // 2, top_left.y() + 60)
        self.show()
        self.field.setFocus()

    def visible_texts(self) -> list[str]:
        """The listed commands, best match first (for the tests and screen readers)."""
        return [self.list.item(i).text() for i in range(self.list.count())]

    def _fill(self, query: str) -> None:
        scored: list[tuple[int, int, QAction]] = []
        for order, action in enumerate(self._actions):
            score = fuzzy_score(query, plain_text(action))
            if score is not None:
                scored.append((-score, order, action))
        scored.sort(key=lambda entry: (entry[0], entry[1]))
        self.list.clear()
        for _score, _order, action in scored:
            keys = shortcut_text(action)
            item = QListWidgetItem(f"{plain_text(action)}\t{keys}" if keys else plain_text(action))
            item.setData(_ACTION_ROLE, action)
            if not action.isEnabled():
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEnabled)
                item.setToolTip("Not available right now")
            self.list.addItem(item)
        self.empty.setVisible(not scored)
        self._select_first_enabled(0, 1)

    def _select_first_enabled(self, start: int, step: int) -> None:
        row = start
        while 0 <= row < self.list.count():
            if self.list.item(row).flags() & Qt.ItemFlag.ItemIsEnabled:
                self.list.setCurrentRow(row)
                return
            row += step

    def _on_field_text_changed(self, text: str) -> None:
        self._fill(text)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.field and event.type() == QEvent.Type.KeyPress:
            assert isinstance(event, QKeyEvent)
            key = event.key()
            if key in (Qt.Key.Key_Down, Qt.Key.Key_Up):
                step = 1 if key == Qt.Key.Key_Down else -1
                self._select_first_enabled(self.list.currentRow() + step, step)
                return True
            if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
                item = self.list.currentItem()
                if item is not None:
                    self._on_list_item_activated(item)
                return True
            if key == Qt.Key.Key_Escape:
                self.hide()
                return True
        return super().eventFilter(watched, event)

    def _on_list_item_activated(self, item: QListWidgetItem) -> None:
        action = item.data(_ACTION_ROLE)
        if not isinstance(action, QAction) or not action.isEnabled():
            return
        self.hide()  # first: the action must find the keyboard free of popups
        action.trigger()
