"""File → "Import sessions from" (issue 25.6 in the window): the CLIs' sessions of this
computer or of a host, picked like the host of a new chat (the same menu: this computer, the
configured hosts, the hosts of recent chats, "Other host…" typed under the New chat button).

The import itself is the app's (tolaria/qt/session_import.py); the window's report bar says
"Looking on HOST…" with Cancel while it runs, then the report or ssh's one line.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QMenu, QWidget

from tolaria.ui.chat.host_control import HOST_PLACEHOLDER, InlineEntry, host_problem
from tolaria.ui.sidebar.new_chat_host import fill_host_menu


class ImportFromMenu(QMenu):
    """The File menu's "Import sessions from": where the sessions are read."""

    #: Import the sessions stored there ("" this computer).
    import_from_requested = Signal(str)

    def __init__(self, choices: Callable[[], list[tuple[str, str]]], entry: InlineEntry,
                 parent: QWidget | None = None) -> None:
        super().__init__("Import sessions &from", parent)
        self.setObjectName("importFromMenu")
        #: (destination, text) of this computer and the hosts (the new-chat picker's).
        self.choices = choices
        self.entry = entry
        self.aboutToShow.connect(self.fill)

    def fill(self) -> None:
        fill_host_menu(self, "Import sessions from", self.choices(), None,
                       self.import_from_requested.emit, self.ask_other)

    def ask_other(self) -> None:
        """The typed host, under the New chat button; Enter imports, Esc closes."""
        self.entry.ask("Import sessions from:", "", HOST_PLACEHOLDER, host_problem,
                       self.import_from_requested.emit)
