"""Run → Chat limits…: one chat's own limits over Preferences' (ADR 0021). Each field left at
"Default" uses Preferences'; a field set here wins (the next run of the chat on). Opened with
``open()`` (never ``exec()`` inside the event loop); ``chosen`` says what to keep."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

from tolaria.core.limits import KINDS, RunLimits, label
from tolaria.ui import theme
from tolaria.ui.settings.fields import muted, title_label
from tolaria.ui.settings.limit_fields import LimitFields


class ChatLimitsDialog(QDialog):
    #: The user kept these limits for the chat: conversation id, RunLimits (None: a default).
    chosen = Signal(int, object)

    def __init__(self, conversation_id: int, title: str, own: RunLimits, defaults: RunLimits,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatLimitsDialog")
        self.setWindowTitle("Chat limits")
        self.conversation_id = conversation_id
        layout = QVBoxLayout(self)
        layout.setContentsMargins(18, 16, 18, 14)
        layout.setSpacing(10)
        intro = muted(QLabel("A run of this chat that reaches one of these is stopped, its answer "
                             "so far kept. Left at Default: Preferences' "
                             f"({describe(defaults)}).", self))
        heading = title_label(self, "chatLimitsTitle")
        heading.setText(f"Limits for “{title}”")
        layout.addWidget(heading)
        layout.addWidget(intro)
        self.fields = LimitFields(self, none_text="Default")
        self.fields.set_limits(own)
        layout.addWidget(self.fields)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.setObjectName("chatLimitsButtons")
        save = buttons.button(QDialogButtonBox.StandardButton.Ok)
        save.setText("Save limits")
        # One leaf widget's style sheet (the transcript's rule, cards/style.py): the primary
        # action in the accent colour, as Preferences' Save.
        theme.follow(save, _save_css)
        buttons.accepted.connect(self._on_buttons_accepted)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.resize(460, self.sizeHint().height())

    def _on_buttons_accepted(self) -> None:
        self.chosen.emit(self.conversation_id, self.fields.limits().effective())
        self.accept()


def describe(limits: RunLimits) -> str:
    """"$2.00, 50 tool calls" or "none"."""
    parts = [label(kind, value) for kind in KINDS
             if (value := limits.value(kind)) is not None]
    return ", ".join(parts) or "none"


def _save_css() -> str:
    accent = theme.css(theme.accent())
    return (f"QPushButton {{ background: {accent}; color: #ffffff; border: 1px solid {accent};"
            " border-radius: 6px; padding: 4px 14px; font-weight: 600; }")
