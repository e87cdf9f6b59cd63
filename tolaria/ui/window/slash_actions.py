"""Tolaria's ``/`` commands (tolaria/ui/composer/slash_menu.py), run by the window: each is an
action of the window's registry or a control of the chat's header, so ``/stop`` does exactly
what Esc or Run → Stop does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import QTimer
from PySide6.QtGui import QAction

from tolaria.ui.chat.chat_stack import ChatStack
from tolaria.ui.chat.header import ChatHeader
from tolaria.ui.sidebar.sidebar import Sidebar


class MainWindow(Protocol):
    """What the commands use of the main window (ui/window/main_window.py)."""

    header: ChatHeader
    stack: ChatStack
    sidebar: Sidebar
    new_action: QAction
    stop_action: QAction
    restart_action: QAction
    export_action: QAction
    chat_limits_action: QAction
    fan_out_action: QAction
    new_worktree_action: QAction
    preferences_action: QAction

    def current_conversation_id(self) -> int | None: ...


def slash_commands(window: MainWindow) -> dict[str, Callable[[], object]]:
    """Command name -> what it does in ``window``."""
    header = window.header

    def find() -> None:
        pane = window.stack.current_pane()
        if pane is not None:
            pane.search_bar.open()

    return {
        "new": window.new_action.trigger,
        "clear": window.new_action.trigger,
        "stop": window.stop_action.trigger,
        "restart": window.restart_action.trigger,
        "rename": window.sidebar.rename_action.trigger,
        "export": window.export_action.trigger,
        "model": header.agent_picker.showPopup,
        "folder": header.folder_button.click,
        "limits": window.chat_limits_action.trigger,
        "fanout": window.fan_out_action.trigger,
        "find": find,
        "worktree": window.new_worktree_action.trigger,
        "preferences": window.preferences_action.trigger,
    }


def run_slash_command(window: MainWindow, conversation_id: int, name: str) -> bool:
    """Run ``name`` for the chat it was typed in (the current one); False if unknown or the chat
    is no longer shown. Run one loop turn later, after the composer has taken its key."""
    action = slash_commands(window).get(name)
    if action is None or window.current_conversation_id() != conversation_id:
        return False
    QTimer.singleShot(0, action)
    return True
