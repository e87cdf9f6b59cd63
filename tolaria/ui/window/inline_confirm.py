"""Inline confirms: a question with two buttons inside the window, never a stock message box.

The focus goes to the safe button, so a second key press never confirms by accident; Esc says no
even though Esc is also the window's Stop shortcut (the buttons claim it while they have focus).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from tolaria.core.store.db import Conversation
from tolaria.ui import theme


class InlineConfirm(QFrame):
    """A question, the safe answer (focused) and the risky one."""

    #: The user chose the risky answer.
    accepted = Signal()
    #: The user chose the safe answer or pressed Esc.
    rejected = Signal()

    def __init__(self, name: str, accept_text: str, reject_text: str = "Cancel",
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(name)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        self.label = QLabel(self)
        self.label.setObjectName(f"{name}Text")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)  # asks about a chat title: prompt text
        layout.addWidget(self.label)
        row = QHBoxLayout()
        row.addStretch(1)
        self.reject_button = QPushButton(reject_text, self)
        self.reject_button.setObjectName(f"{name}Reject")
        self.reject_button.clicked.connect(self._on_reject_button_clicked)
        row.addWidget(self.reject_button)
        self.accept_button = QPushButton(accept_text, self)
        self.accept_button.setObjectName(f"{name}Accept")
        theme.follow_color(self.accept_button, theme.warning_color)
        self.accept_button.clicked.connect(self._on_accept_button_clicked)
        row.addWidget(self.accept_button)
        layout.addLayout(row)
        for button in (self.reject_button, self.accept_button):
            button.setAutoDefault(True)
            button.installEventFilter(self)
        self.hide()

    def ask(self, question: str) -> None:
        self.label.setText(question)
        self.setAccessibleName(question)
        self.show()
        self.reject_button.setFocus(Qt.FocusReason.OtherFocusReason)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind in (QEvent.Type.ShortcutOverride, QEvent.Type.KeyPress):
            assert isinstance(event, QKeyEvent)
            if event.key() == Qt.Key.Key_Escape:
                event.accept()  # ShortcutOverride accepted: Esc comes here, not to Stop
                if kind == QEvent.Type.KeyPress:
                    self._on_reject_button_clicked()
                return True
        return super().eventFilter(watched, event)

    def _on_reject_button_clicked(self) -> None:
        self.hide()
        self.rejected.emit()

    def _on_accept_button_clicked(self) -> None:
        self.hide()
        self.accepted.emit()


class DeleteConfirm(InlineConfirm):
    """"Delete “title” and its transcript?" under the chat list."""

    #: The user confirmed: conversation id.
    confirmed = Signal(int)
    #: The user said no.
    cancelled = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("deleteConfirm", "Delete", parent=parent)
        self.conversation_id: int | None = None
        self.remove_worktree = QCheckBox(self)
        self.remove_worktree.setObjectName("removeWorktreeCheck")
        self.remove_worktree.hide()
        layout = self.layout()
        assert isinstance(layout, QVBoxLayout)
        layout.insertWidget(1, self.remove_worktree)
        self.accepted.connect(self._on_accepted)
        self.rejected.connect(self._on_rejected)

    def ask_delete(self, conversation: Conversation, *, running: bool, worktree: str = "") -> None:
        """``worktree``: the chat's git worktree, offered for removal too (unchecked)."""
        self.conversation_id = conversation.id
        extra = " Its running turn is stopped first." if running else ""
        self.remove_worktree.setChecked(False)
        theme.follow(self.remove_worktree, theme.indicator_css)
        self.remove_worktree.setText(f"Also remove its git worktree {worktree} (git keeps it "
                                     "if it has uncommitted work; the branch stays)")
        self.remove_worktree.setVisible(bool(worktree))
        self.ask(f"Delete “{conversation.title}” and its transcript?{extra}")

    def _on_accepted(self) -> None:
        conversation_id, self.conversation_id = self.conversation_id, None
        if conversation_id is not None:
            self.confirmed.emit(conversation_id)

    def _on_rejected(self) -> None:
        self.conversation_id = None
        self.cancelled.emit()
