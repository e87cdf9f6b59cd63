"""Tells the user in the window when a chat they are not looking at finishes
(``[behaviour] notify_background``): a notice in the status bar plus ``QApplication.alert``
(the taskbar entry flashes / the dock icon bounces; it never takes the focus). The desktop's
own notification is tolaria/qt/notify/ (ADR 0030). Only the chat's title is shown.
"""

from __future__ import annotations

from PySide6.QtWidgets import QApplication, QMainWindow

from tolaria.core.events import STOP_CANCELLED, STOP_END_TURN, STOP_ERROR

_NOTICE_MS = 15_000
_ENDINGS = {STOP_END_TURN: "finished", STOP_CANCELLED: "was stopped",
            STOP_ERROR: "ended with an error"}


class BackgroundNotifier:
    def __init__(self, window: QMainWindow) -> None:
        self._window = window
        #: The last notice given (for the status bar and the tests).
        self.last_notice = ""

    def chat_finished(self, title: str, stop_reason: str) -> None:
        ending = _ENDINGS.get(stop_reason, f"ended ({stop_reason})")
        text = f"“{title}” {ending}"
        self.last_notice = text
        self._window.statusBar().showMessage(f"Background chat {text}", _NOTICE_MS)
        QApplication.alert(self._window)
