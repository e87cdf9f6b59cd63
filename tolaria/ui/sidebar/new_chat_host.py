"""Where a new chat runs (issue 25 item 1): the "▾" beside "New chat" and its typed host.

The plain "New chat" (and Ctrl+N) keeps the current chat's host: a new chat made from a remote
chat's context stays on that machine. The menu offers this computer, the settings'
``[hosts."NAME"]``, the hosts of recent chats and "Other host…" (typed in the line under the
button, checked by the same parser as ``tolaria run --host``, the reason beside the field).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QMenu, QToolButton, QWidget

from tolaria.config.remote_hosts import configured_hosts
from tolaria.core.store.db import Conversation
from tolaria.ui.chat.host_control import HOST_PLACEHOLDER, InlineEntry, host_problem

#: The menu lists at most this many hosts of recent chats (besides the configured ones).
RECENT_HOSTS = 5
THIS_COMPUTER = "This computer"


def hosts_of_chats(chats: Iterable[Conversation],
                   current_id: int | None) -> tuple[list[str], str]:
    """The hosts of ``chats``, most recently active first, and the current chat's ("" local)."""
    listed = sorted(chats, key=lambda c: -c.updated_at)
    recent = list(dict.fromkeys(c.host for c in listed if c.host))
    current = next((c for c in listed if c.id == current_id), None)
    return recent, (current.host or "") if current is not None else ""


def folder_on(host: str, current: Conversation | None, local: str) -> str:
    """A new chat's folder: ``local`` here; on a host the current chat's folder when it is on
    the same host, else "" (the host's home)."""
    if not host:
        return local
    return (current.cwd or "") if current is not None and current.host == host else ""


def fill_host_menu(menu: QMenu, title: str, choices: list[tuple[str, str]], current: str | None,
                   pick: Callable[[str], None], other: Callable[[], None]) -> None:
    """``menu`` as the host picker: ``title`` (greyed), the ``choices`` ((destination, text):
    this computer first when offered, then the hosts; ``current`` checked), "Other host…"."""
    menu.clear()
    heading = menu.addAction(title)
    heading.setEnabled(False)
    group = QActionGroup(menu)
    for host, text in choices:
        action = QAction(text, menu)
        action.setCheckable(True)
        action.setChecked(host == current)
        action.setActionGroup(group)
        action.triggered.connect(lambda _=False, h=host: pick(h))
        menu.addAction(action)
        if not host:
            menu.addSeparator()
    menu.addSeparator()
    menu.addAction("Other host…").triggered.connect(other)


class NewChatHostButton(QToolButton):
    """"▾" next to "New chat": a new chat on this computer, a configured or recent host, or a
    typed one."""

    #: A new chat on this host ("" for this computer).
    new_chat_on_host_requested = Signal(str)

    def __init__(self, entry: InlineEntry, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("newChatHostButton")
        self.setAccessibleName("New chat on…")
        self.setToolTip("New chat on this computer or on another machine (ssh host)")
        self.setText("▾")
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.setStyleSheet("QToolButton::menu-indicator { image: none; width: 0px; }")
        self.entry = entry
        #: The hosts of the chats, newest first, and the current chat's host ("" local).
        self.hosts_of_chats: Callable[[], tuple[list[str], str]] = lambda: ([], "")
        menu = QMenu(self)
        menu.setObjectName("newChatHostMenu")
        menu.aboutToShow.connect(self._fill_menu)
        self.setMenu(menu)

    def choices(self) -> list[tuple[str, str]]:
        """(destination, menu text) for this computer, the configured and the recent hosts."""
        recent, _current = self.hosts_of_chats()
        configured = configured_hosts()
        out = [("", THIS_COMPUTER)] + [(name, name) for name in configured]
        out += [(host, host) for host in [h for h in recent if h not in configured]
                [:RECENT_HOSTS]]
        return out

    def _fill_menu(self) -> None:
        _recent, current = self.hosts_of_chats()
        fill_host_menu(self.menu(), "New chat on", self.choices(), current,
                       self.new_chat_on_host_requested.emit, self.ask_other)

    def ask_other(self) -> None:
        """The typed host, under the button; Enter makes the chat, Esc closes."""
        self.entry.ask("New chat on:", "", HOST_PLACEHOLDER, host_problem,
                       self.new_chat_on_host_requested.emit)
        self.entry.edit.setFocus(Qt.FocusReason.OtherFocusReason)
