"""The notice bar over the chat when chats cannot be saved (a full disk, a read-only folder).

Runs go on and their output still shows, but it is not kept: the user must know, once, without a
dialog in the way. The store retries by itself; the bar goes when writing works again. Dismissed,
it stays away until the problem changes or comes back after a recovery.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from tolaria.ui import theme
from tolaria.ui.transcript.cards.style import flat_button_css, follow_palette


def notice_text(path: str, reason: str) -> str:
    fix = ("free some space on that disk" if reason == "disk full"
           else "make that folder writable or free some space")
    return (f"Could not save chats to {path}: {reason}. Output still shows here but is not "
            f"kept; {fix} and it is saved again at once.")


class StoreNotice(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("storeNotice")
        self.setAccessibleName("Chats are not being saved")
        row = QHBoxLayout(self)
        row.setContentsMargins(12, 6, 8, 6)
        self.label = QLabel(self)
        self.label.setObjectName("storeNoticeText")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)  # a path, SQLite's words
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row.addWidget(self.label, 1)
        self.dismiss = QPushButton("Dismiss", self)
        self.dismiss.setObjectName("storeNoticeDismiss")
        self.dismiss.setAutoDefault(False)
        self.dismiss.clicked.connect(self.hide)
        row.addWidget(self.dismiss, 0, Qt.AlignmentFlag.AlignTop)
        self._problem: tuple[str, str] | None = None
        self.restyle()
        follow_palette(self, self.restyle)
        self.hide()

    @property
    def text(self) -> str:
        return "" if self.isHidden() else self.label.text()

    def show_failure(self, path: str, reason: str) -> None:
        if self._problem == (path, reason):
            return  # the same problem again: said once
        self._problem = (path, reason)
        self.label.setText(notice_text(path, reason))
        self.show()

    def clear(self) -> None:
        self._problem = None
        self.hide()

    def restyle(self) -> None:
        background, edge, _ = theme.error_colors()
        self.setStyleSheet(
            f"QFrame#storeNotice {{ background: {theme.css(background)};"
            f" border-bottom: 1px solid {theme.css(edge)}; }}")
        self.dismiss.setStyleSheet(flat_button_css())
