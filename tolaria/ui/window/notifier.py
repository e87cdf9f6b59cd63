"""Tells the user when a chat they are not looking at finishes (``[behaviour] notify_background``).

A desktop notification through the system tray where there is one; always an in-app notice in
the status bar plus ``QApplication.alert`` (the taskbar entry flashes / the dock icon bounces).
Only the chat's title is shown, never its content.
"""

from __future__ import annotations

from PySide6.QtWidgets import QApplication, QMainWindow, QSystemTrayIcon

from tolaria.core.events import STOP_CANCELLED, STOP_END_TURN, STOP_ERROR
from tolaria.ui import theme

_NOTICE_MS = 15_000
_ENDINGS = {STOP_END_TURN: "finished", STOP_CANCELLED: "was stopped",
            STOP_ERROR: "ended with an error"}


class BackgroundNotifier:
    def __init__(self, window: QMainWindow) -> None:
        self._window = window
        self._tray: QSystemTrayIcon | None = None
        #: The last notice given (for the status bar and the tests).
        self.last_notice = ""

    def chat_finished(self, title: str, stop_reason: str) -> None:
        ending = _ENDINGS.get(stop_reason, f"ended ({stop_reason})")
        text = f"“{title}” {ending}"
        self.last_notice = text
        self._window.statusBar().showMessage(f"Background chat {text}", _NOTICE_MS)
        QApplication.alert(self._window)
        tray = self._tray_icon()
        if tray is not None:
            tray.showMessage("Tolaria", text, theme.app_icon(), _NOTICE_MS)

    def _tray_icon(self) -> QSystemTrayIcon | None:
        if not QSystemTrayIcon.isSystemTrayAvailable():
            return None
        if self._tray is None:
            self._tray = QSystemTrayIcon(theme.app_icon(), self._window)
            self._tray.setToolTip("Tolaria")
            self._tray.activated.connect(self._on_tray_activated)
            self._tray.messageClicked.connect(self._on_tray_activated)
            self._tray.show()
        return self._tray

    def _on_tray_activated(self, *_: object) -> None:
        self._window.showNormal()
        self._window.raise_()
        self._window.activateWindow()
