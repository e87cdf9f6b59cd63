"""The View menu: find in the chat, and the theme (system, light, dark), applied at once."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMenu, QWidget

from tolaria.ui import theme

_LABELS = {"system": "&System", "light": "&Light", "dark": "&Dark"}


class ViewMenu(QMenu):
    #: The user picked a theme (already applied): "system", "light" or "dark".
    theme_chosen = Signal(str)
    #: Find in the current chat (Ctrl+F).
    find_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("&View", parent)
        self.find_action = QAction("&Find in Chat…", self)
        self.find_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Find))
        self.find_action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.find_action.triggered.connect(self.find_requested)
        self.addAction(self.find_action)
        self.addSeparator()
        themes = self.addMenu("&Theme")
        group = QActionGroup(self)
        group.setExclusive(True)
        self.theme_actions: dict[str, QAction] = {}
        for name in theme.THEMES:
            action = QAction(_LABELS[name], self)
            action.setCheckable(True)
            action.setData(name)
            action.triggered.connect(lambda _on=False, n=name: self._on_theme_triggered(n))
            group.addAction(action)
            themes.addAction(action)
            self.theme_actions[name] = action

    def set_current(self, name: str) -> None:
        """Apply ``name`` and show it checked (the settings file says so)."""
        theme.apply_theme(name)
        action = self.theme_actions.get(name)
        if action is not None:
            action.setChecked(True)

    def _on_theme_triggered(self, name: str) -> None:
        self.set_current(name)
        self.theme_chosen.emit(name)
