"""The prompt card of a permission question, inside the running turn of the transcript.

Non-modal on purpose: the composer, Stop and the other chats stay usable while the question is
open, and several open questions simply stack in the turn. The card shows the tool's title and
its input (pretty, cut short, secrets masked: tolaria/ui/transcript/pretty_input.py) and offers the
agent's own choices: "Allow once", "Allow always" (only when offered) and "Reject". It emits the
choice as an intent; what it shows afterwards comes from the ``permission_settled`` fact (or
"cancelled" when the turn ends first). Keyboard: Ctrl+Shift+A (in the chat) or Tab reaches the
buttons; Space, Enter or Return presses the focused one. The card never takes the focus itself.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from tolaria.core.permissions import PermissionRequest
from tolaria.ui import theme
from tolaria.ui.transcript.pretty_input import pretty_input, redact_text

#: What the card says once the question ended, by outcome (see tolaria/qt/permissions.py).
OUTCOME_WORDS = {
    "allow_once": "Allowed once",
    "allow_always": "Allowed always (remembered for this conversation until Tolaria quits)",
    "remembered": "Allowed: you chose \"Allow always\" earlier in this conversation",
    "reject": "Rejected",
    "cancelled": "Cancelled: the turn was stopped before you answered",
    "closed": "Closed: the turn ended before you answered",
}
#: Moves the focus to the oldest open question of the focused chat (tolaria/ui/chat/chat_pane.py).
ANSWER_SHORTCUT = "Ctrl+Shift+A"
_BUTTONS = (("allow_once", "Allow once", "allowOnceButton"),
            ("allow_always", "Allow always", "allowAlwaysButton"))


class PermissionCard(QFrame):
    #: The user chose an answer: question key, option id ("" = reject, the agent offered no
    #: reject choice).
    answer_requested = Signal(str, str)

    def __init__(self, key: str, request: PermissionRequest,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("permissionCard")
        self.key = key
        self.request = request
        #: None while the question is open; then one of OUTCOME_WORDS' keys.
        self.outcome: str | None = None
        self.title = redact_text(request.title or "a tool")
        theme.follow(self, lambda: (
            f"QFrame#permissionCard {{ background: {theme.css(theme.card_background())};"
            f" border: 1px solid {theme.css(theme.warning_color())}; border-radius: 6px; }}"))
        self.setAccessibleName(f"Permission request: {self.title}")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        heading = QLabel(f"Allow {self.title}?", self)
        heading.setObjectName("permissionTitle")
        heading.setTextFormat(Qt.TextFormat.PlainText)
        heading.setWordWrap(True)
        heading.setStyleSheet("font-weight: bold;")
        layout.addWidget(heading)
        self.input_label = QLabel(pretty_input(request.input), self)
        self.input_label.setObjectName("permissionInput")
        self.input_label.setTextFormat(Qt.TextFormat.PlainText)
        self.input_label.setWordWrap(True)
        self.input_label.setFont(theme.mono_font())
        self.input_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        theme.follow_color(self.input_label, theme.muted_text)
        layout.addWidget(self.input_label)
        self._row = QWidget(self)
        row = QHBoxLayout(self._row)
        row.setContentsMargins(0, 0, 0, 0)
        self.buttons: dict[str, QPushButton] = {}
        for kind, text, name in _BUTTONS:
            choice = request.choice(kind)
            if choice is not None:
                self._button(row, choice.option_id, text, name)
        reject = request.choice("reject_once", "reject_always")
        self._button(row, reject.option_id if reject is not None else "", "Reject", "rejectButton")
        row.addStretch(1)
        layout.addWidget(self._row)
        self.status = QLabel(self)
        self.status.setObjectName("permissionOutcome")
        self.status.setWordWrap(True)
        self.status.hide()
        layout.addWidget(self.status)

    def _button(self, row: QHBoxLayout, option_id: str, text: str, name: str) -> None:
        button = QPushButton(text, self._row)
        button.setObjectName(name)
        button.setAccessibleName(f"{text}: {self.title}")
        button.setToolTip(f"{text} ({ANSWER_SHORTCUT} brings the focus to an open question)")
        button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        button.clicked.connect(lambda: self._choose(option_id))
        row.addWidget(button)
        self.buttons[name] = button

    @property
    def pending(self) -> bool:
        return self.outcome is None

    def focus_answers(self) -> bool:
        """Put the keyboard focus on the first button; False once answered."""
        buttons = list(self.buttons.values())
        if not self.pending or not self._row.isEnabled() or not buttons:
            return False
        buttons[0].setFocus(Qt.FocusReason.ShortcutFocusReason)
        return True

    @property
    def allowed(self) -> bool:
        return self.outcome in ("allow_once", "allow_always", "remembered")

    def _choose(self, option_id: str) -> None:
        if not self.pending or not self._row.isEnabled():
            return
        self._row.setEnabled(False)  # one answer; the outcome arrives as a fact
        self.answer_requested.emit(self.key, option_id)

    def settle(self, outcome: str) -> None:
        """Show how the question ended; the buttons go away."""
        if not self.pending:
            return
        self.outcome = outcome
        self._row.hide()
        words = OUTCOME_WORDS.get(outcome, outcome)
        self.status.setText(words)
        theme.follow_color(self.status,
                           theme.success_color if self.allowed else theme.warning_color)
        self.status.setAccessibleName(f"Permission {self.title}: {words}")
        self.status.show()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        focused = self.focusWidget()
        if (event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
                and isinstance(focused, QPushButton) and focused in self.buttons.values()):
            focused.click()
            return
        super().keyPressEvent(event)
