"""The main window's action registry: one list the menus, the command palette and the Shortcuts
page all read, so none of them can forget an action or show a stale shortcut.

Every action is a window-wide ``QAction``: its shortcut works from anywhere in the window, not
only when the widget that owns the action has the focus.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QKeySequenceEdit,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)

from tolaria.config.settings import DEFAULT_PREFERENCES, DEFAULT_RESTART
from tolaria.ui.transcript.permission_card import ANSWER_SHORTCUT
from tolaria.ui.window import keymap

PALETTE_SHORTCUT = "Ctrl+K"
#: The palette's second key, as in VS Code and Zed.
PALETTE_SHORTCUT_2 = "Ctrl+Shift+P"
SEARCH_SHORTCUT = "Ctrl+Shift+F"
FAN_OUT_SHORTCUT = "Ctrl+Shift+N"
#: Next / previous chat and Delete chat differ on macOS: tolaria/ui/window/keymap.py.
NEXT_CHAT_SHORTCUT = "Ctrl+Tab"
PREVIOUS_CHAT_SHORTCUT = "Ctrl+Shift+Tab"
RENAME_SHORTCUT = "F2"
DELETE_SHORTCUT = "Del"
#: The fan-out window's Close: QKeySequence.StandardKey.Close (Ctrl+W, ⌘W) where it has one.
CLOSE_WINDOW_SHORTCUT = "Ctrl+W"


@dataclass(frozen=True)
class FixedShortcut:
    """A shortcut Preferences cannot change (listed read-only on the Shortcuts page)."""

    label: str
    keys: str


def fixed_shortcuts(keys: keymap.Keymap) -> tuple[FixedShortcut, ...]:
    """The shortcuts that are not in settings.toml, in the order the Shortcuts page lists
    them (in Qt's portable text: the page shows them as the platform writes them)."""
    return (
        FixedShortcut("Command palette", f"{PALETTE_SHORTCUT} / {PALETTE_SHORTCUT_2}"),
        FixedShortcut("Search chats", SEARCH_SHORTCUT),
        FixedShortcut("Next chat", " / ".join(keys.next_chat)),
        FixedShortcut("Previous chat", " / ".join(keys.previous_chat)),
        FixedShortcut("Go to chat 1 … 9", "Ctrl+1 … Ctrl+9"),
        FixedShortcut("Rename chat", RENAME_SHORTCUT),
        FixedShortcut("Delete chat (when no text field has the focus)",
                      " / ".join(keys.delete_chat)),
        FixedShortcut("Find in this chat", "Ctrl+F"),
        FixedShortcut("Restart turn", DEFAULT_RESTART),
        FixedShortcut("Move a queued message up / down", "Alt+Up / Alt+Down"),
        FixedShortcut("Go to the open permission question", ANSWER_SHORTCUT),
        FixedShortcut("Ask several agents", FAN_OUT_SHORTCUT),
        FixedShortcut("Close the fan-out window", CLOSE_WINDOW_SHORTCUT),
        FixedShortcut("Preferences", DEFAULT_PREFERENCES),
        FixedShortcut("Quit", "Ctrl+Q"),
    )


#: This platform's list (tolaria/ui/window/keymap.py).
FIXED_SHORTCUTS = fixed_shortcuts(keymap.current())


def plain_text(action: QAction) -> str:
    """An action's menu text without its mnemonic ampersand and ellipsis."""
    return action.text().replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip("…")


def shortcut_text(action: QAction) -> str:
    return action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)


def focus_is_editable() -> bool:
    """Whether the focused widget takes typed text (Del there deletes a character, not a chat)."""
    widget = QApplication.focusWidget()
    if isinstance(widget, QLineEdit):
        return not widget.isReadOnly()
    if isinstance(widget, (QPlainTextEdit, QTextEdit)):
        return not widget.isReadOnly()
    if isinstance(widget, QComboBox):
        return widget.isEditable()
    return isinstance(widget, (QAbstractSpinBox, QKeySequenceEdit))


def keyboard_is_free() -> bool:
    """No popup (menu, combo box list, completer, the palette) and no modal dialog owns the keys."""
    return QApplication.activePopupWidget() is None and QApplication.activeModalWidget() is None


class ActionRegistry:
    """The window's actions, in palette order."""

    def __init__(self, window: QWidget) -> None:
        self._window = window
        self._actions: list[QAction] = []

    def add(self, text: str, key: QKeySequence | str | None, slot: Callable[[], object], *,
            name: str = "", in_palette: bool = True) -> QAction:
        action = QAction(text, self._window)
        # Only Preferences, Quit and About go to macOS's application menu (set where they are
        # made): Qt's default text heuristic would also move any action whose text starts with
        # "About", "Settings", "Options"...
        action.setMenuRole(QAction.MenuRole.NoRole)
        if name:
            action.setObjectName(name)
        if key is not None:
            action.setShortcut(QKeySequence(key) if isinstance(key, str) else key)
        action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        action.triggered.connect(lambda _checked=False: slot())
        self._window.addAction(action)
        if in_palette:
            self._actions.append(action)
        return action

    def adopt(self, action: QAction) -> QAction:
        """List an action another widget owns (the sidebar's Rename and Delete)."""
        self._actions.append(action)
        return action

    def actions(self) -> list[QAction]:
        return list(self._actions)
