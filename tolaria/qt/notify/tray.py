"""The system tray's balloon, where the desktop has no notification service.

A balloon has no buttons: a permission question or a stall says to open Tolaria, and a click
on the balloon opens the chat it is about (the "default" action). A newer balloon replaces the
one shown (the tray shows one at a time); it cannot be taken back, so ``close`` only forgets it.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QSystemTrayIcon, QWidget

from tolaria.chats.notify.notices import DEFAULT_ACTION, Notice

_SHOWN_MS = 15_000


class TrayNotifications:
    def __init__(self, parent: QWidget, icon: QIcon,
                 on_action: Callable[[str, str], None]) -> None:
        self._parent = parent
        self._icon = icon
        self.on_action = on_action
        self._tray: QSystemTrayIcon | None = None
        #: The slot of the balloon shown last (what a click opens).
        self.slot: str | None = None
        #: Every balloon shown: (summary, body), for the tests and the log.
        self.shown: list[tuple[str, str]] = []

    @staticmethod
    def available() -> bool:
        return QSystemTrayIcon.isSystemTrayAvailable()

    def show(self, notice: Notice, *, body_note: str = "") -> bool:
        body = notice.body + (f"\n{body_note}" if body_note else "")
        self.shown.append((notice.summary, body))
        self.slot = notice.slot
        tray = self._tray_icon()
        if tray is None:
            return False
        tray.showMessage(notice.summary, body, self._icon, _SHOWN_MS)
        return True

    def close(self, slot: str) -> None:
        if self.slot == slot:
            self.slot = None

    def hide(self) -> None:
        if self._tray is not None:
            self._tray.hide()

    def _tray_icon(self) -> QSystemTrayIcon | None:
        if not self.available():
            return None
        if self._tray is None:
            self._tray = QSystemTrayIcon(self._icon, self._parent)
            self._tray.setToolTip("Tolaria")
            self._tray.messageClicked.connect(self._on_tray_message_clicked)
            self._tray.show()
        return self._tray

    def _on_tray_message_clicked(self) -> None:
        if self.slot is not None:
            self.on_action(self.slot, DEFAULT_ACTION)
