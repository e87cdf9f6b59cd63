"""ssh's own questions in the chat (ADR 0033): a card above the composer with ssh's words.

An unknown host key ("Are you sure you want to continue connecting (yes/no/[fingerprint])?")
gets Yes / No: "yes" goes back only when Yes is clicked. A passphrase, a password or a PIN gets
a masked field with Continue / Cancel: the text leaves the field when sent and is never shown,
logged or stored. Cancel, No, closing the card: a refusal (the askpass program exits 1, ssh
gives up with its own line). Non-modal: Stop and the other chats stay usable.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from tolaria.core.remote.askpass_desk import KIND_CONFIRM, KIND_NOTICE, KIND_SECRET, SshQuestion
from tolaria.ui import theme


class SshQuestionCard(QFrame):
    #: The user answered: question id, answer ("yes", or the secret typed).
    answered = Signal(str, str)
    #: The user said no, cancelled or closed the card: question id.
    refused = Signal(str)

    def __init__(self, question: SshQuestion, host: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sshQuestionCard")
        self.question = question
        self.host = host
        self.restyle()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        heading = QLabel(f"ssh asks, connecting to {host}" if host else "ssh asks", self)
        heading.setObjectName("sshQuestionTitle")
        font = heading.font()
        font.setBold(True)
        heading.setFont(font)
        heading.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(heading)
        self.prompt = QLabel(question.prompt.rstrip(), self)  # ssh's own words, verbatim
        self.prompt.setObjectName("sshQuestionPrompt")
        self.prompt.setTextFormat(Qt.TextFormat.PlainText)
        self.prompt.setWordWrap(True)
        self.prompt.setFont(theme.mono_font())
        self.prompt.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.prompt)
        self.setAccessibleName(f"ssh question: {question.prompt.strip()}")
        row = QHBoxLayout()
        row.setContentsMargins(0, 4, 0, 0)
        self.field: QLineEdit | None = None
        if question.kind == KIND_SECRET:
            self.field = QLineEdit(self)
            self.field.setObjectName("sshSecret")
            self.field.setEchoMode(QLineEdit.EchoMode.Password)
            self.field.setAccessibleName("ssh's question: your answer (hidden)")
            self.field.setPlaceholderText("typed here, never shown or stored")
            self.field.returnPressed.connect(self._send_secret)
            row.addWidget(self.field, 1)
        self.yes = QPushButton(self)
        self.no = QPushButton(self)
        if question.kind == KIND_CONFIRM:
            self.yes.setText("Yes")
            self.no.setText("No")
            self.yes.setToolTip("Answer \"yes\" to ssh")
            self.no.setToolTip("Refuse: ssh ends the connection")
        elif question.kind == KIND_NOTICE:
            self.yes.setText("OK")
            self.no.hide()
        else:
            self.yes.setText("Continue")
            self.no.setText("Cancel")
        self.yes.setObjectName("sshYes")
        self.no.setObjectName("sshNo")
        self.yes.clicked.connect(self._on_yes_clicked)
        self.no.clicked.connect(self.refuse)
        if question.kind != KIND_SECRET:
            row.addStretch(1)
        row.addWidget(self.no)
        row.addWidget(self.yes)
        layout.addLayout(row)

    def restyle(self) -> None:
        theme.follow(self, lambda: (
            f"QFrame#sshQuestionCard {{ background: {theme.css(theme.card_background())};"
            f" border: 1px solid {theme.css(theme.warning_color())}; border-radius: 6px; }}"))

    def focus_answer(self) -> None:
        (self.field or self.yes).setFocus(Qt.FocusReason.OtherFocusReason)

    def _on_yes_clicked(self) -> None:
        if self.question.kind == KIND_SECRET:
            self._send_secret()
        elif self.question.kind == KIND_CONFIRM:
            self.answered.emit(self.question.id, "yes")
        else:
            self.answered.emit(self.question.id, "")

    def _send_secret(self) -> None:
        assert self.field is not None
        secret = self.field.text()
        self.field.clear()  # the field holds it no longer than needed
        self.answered.emit(self.question.id, secret)

    def refuse(self) -> None:
        if self.field is not None:
            self.field.clear()
        self.refused.emit(self.question.id)


class SshQuestions(QWidget):
    """A chat's open ssh questions, oldest first, between the transcript and the composer."""

    #: The user answered an ssh question: question id, answer.
    answer_requested = Signal(str, str)
    #: The user refused an ssh question: question id.
    refusal_requested = Signal(str)
    #: A first question opened (True) or the last one closed (False).
    asking_changed = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sshQuestions")
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(12, 0, 12, 0)
        self.cards: dict[str, SshQuestionCard] = {}
        self.hide()

    def ask(self, question: SshQuestion, host: str) -> SshQuestionCard:
        card = SshQuestionCard(question, host, self)
        card.answered.connect(self._on_card_answered)
        card.refused.connect(self._on_card_refused)
        self.cards[question.id] = card
        self._layout.addWidget(card)
        self.show()
        card.focus_answer()
        if len(self.cards) == 1:
            self.asking_changed.emit(True)
        return card

    def refuse_all(self) -> None:
        """The turn is being stopped: every open question is refused."""
        for card in list(self.cards.values()):
            card.refuse()

    def focus_oldest(self) -> bool:
        """Focus the oldest open question's answer (False: none is open)."""
        for card in self.cards.values():
            card.focus_answer()
            return True
        return False

    def close_question(self, question_id: str) -> None:
        """The question went away without an answer here (timeout, the turn stopped)."""
        card = self.cards.pop(question_id, None)
        if card is not None:
            if card.field is not None:
                card.field.clear()
            card.hide()
            card.deleteLater()
            if not self.cards:
                self.asking_changed.emit(False)
        self.setVisible(bool(self.cards))

    def _on_card_answered(self, question_id: str, answer: str) -> None:
        self.close_question(question_id)
        self.answer_requested.emit(question_id, answer)

    def _on_card_refused(self, question_id: str) -> None:
        self.close_question(question_id)
        self.refusal_requested.emit(question_id)


class SshQuestionDialog(QDialog):
    """ssh's questions where no chat is shown (a look at a host from elsewhere): the same
    cards in a small non-modal dialog; closing it (or Esc) refuses what is still open."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sshQuestionDialog")
        self.setWindowTitle("ssh asks")
        self.setAccessibleName("ssh's question")
        self.setModal(False)  # Stop and the chats stay usable
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 12, 0, 12)
        self.questions = SshQuestions(self)
        layout.addWidget(self.questions)
        self.questions.asking_changed.connect(self._on_questions_asking_changed)
        self.resize(560, 10)

    def _on_questions_asking_changed(self, asking: bool) -> None:
        if asking:
            hosts = {card.host for card in self.questions.cards.values() if card.host}
            self.setWindowTitle(f"Connecting to {hosts.pop()}" if len(hosts) == 1
                                else "ssh asks")
            self.show()
            self.raise_()
            self.activateWindow()
            self.questions.focus_oldest()
        else:
            self.hide()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.questions.refuse_all()  # closing is a refusal, never a silent wait
        super().closeEvent(event)

    def reject(self) -> None:  # Esc
        self.questions.refuse_all()
        super().reject()


class SshQuestionRouter(QObject):
    """Brings each ssh question to its chat's pane (the window's part of ADR 0033)."""

    #: The user answered an ssh question: question id, answer (never logged).
    answer_requested = Signal(str, str)
    #: The user refused an ssh question (or its chat has no pane to ask in): question id.
    refusal_requested = Signal(str)
    #: ssh's question is shown in a chat's pane: conversation id.
    question_shown = Signal(int)

    def __init__(self, panes: Callable[[int], QWidget | None], host_of: Callable[[int], str],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._panes = panes
        self._host_of = host_of
        #: question id -> the SshQuestions it is shown in.
        self._shown: dict[str, SshQuestions] = {}

        #: Where a question of no chat is asked (made when first needed).
        self.dialog: SshQuestionDialog | None = None

    def on_question_asked(self, question: SshQuestion) -> None:
        if question.conversation_id == 0:  # a look at a host, no chat shown: a dialog
            questions: SshQuestions | None = self._dialog().questions
        else:
            pane = self._panes(question.conversation_id)
            questions = pane.findChild(SshQuestions) if pane is not None else None
        if questions is None:  # nowhere to ask: ssh gets a refusal, never a silent wait
            self.refusal_requested.emit(question.id)
            return
        if not questions.property("routed"):
            questions.setProperty("routed", True)
            questions.answer_requested.connect(self._on_answer_requested)
            questions.refusal_requested.connect(self._on_refusal_requested)
        self._shown[question.id] = questions
        questions.ask(question, question.host or self._host_of(question.conversation_id))
        if question.conversation_id:
            self.question_shown.emit(question.conversation_id)

    def _dialog(self) -> SshQuestionDialog:
        if self.dialog is None:
            parent = self.parent()
            self.dialog = SshQuestionDialog(parent if isinstance(parent, QWidget) else None)
        return self.dialog

    def on_question_closed(self, question_id: str) -> None:
        questions = self._shown.pop(question_id, None)
        if questions is not None:
            questions.close_question(question_id)

    def _on_answer_requested(self, question_id: str, answer: str) -> None:
        self._shown.pop(question_id, None)
        self.answer_requested.emit(question_id, answer)

    def _on_refusal_requested(self, question_id: str) -> None:
        self._shown.pop(question_id, None)
        self.refusal_requested.emit(question_id)
