"""ssh's question where no chat on that host is shown (a look at a host's agents, ADR 0033 note):
the router opens it in a small non-modal dialog titled with the host the desk named; Yes sends
"yes" and the dialog goes; Esc (or closing it) refuses what is open; a question of a chat still
goes to that chat's pane. Pictures light and dark (``TOLARIA_DOCS_SHOTS=1``:
docs/ssh-question-dialog[-dark].png). The real-sshd version: tests/remote/test_askpass_window.py."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLabel, QWidget
from pytestqt.qtbot import QtBot
from ui.uihelpers import save_shot

from tolaria.core.remote.askpass_desk import KIND_CONFIRM, SshQuestion
from tolaria.ui import theme
from tolaria.ui.chat.ssh_question import SshQuestionRouter, SshQuestions

PROMPT = ("The authenticity of host 'devbox (10.0.0.2)' can't be established.\n"
          "ED25519 key fingerprint is SHA256:Xq9.\n"
          "Are you sure you want to continue connecting (yes/no/[fingerprint])? ")


def test_a_question_of_no_chat_opens_a_dialog(qtbot: QtBot, tmp_path: Path) -> None:
    window = QWidget()
    qtbot.addWidget(window)
    pane = QWidget(window)
    in_pane = SshQuestions(pane)
    router = SshQuestionRouter(lambda c: pane if c == 7 else None, lambda _c: "", window)
    answers: list[tuple[str, str]] = []
    refusals: list[str] = []
    router.answer_requested.connect(lambda q, a: answers.append((q, a)))
    router.refusal_requested.connect(refusals.append)
    window.show()

    router.on_question_asked(SshQuestion("q1", 0, PROMPT, KIND_CONFIRM, host="devbox"))
    dialog = router.dialog
    assert dialog is not None and dialog.isVisible() and not dialog.isModal()
    (card,) = dialog.questions.cards.values()
    title = card.findChild(QLabel, "sshQuestionTitle")
    assert title is not None and title.text() == "ssh asks, connecting to devbox"
    assert dialog.windowTitle() == "Connecting to devbox"
    assert card.prompt.text() == PROMPT.rstrip()
    for suffix, name in (("", "light"), ("-dark", "dark")):
        theme.apply_theme(name)
        qtbot.wait(50)
        assert save_shot(dialog, tmp_path, f"ssh-question-dialog{suffix}.png").is_file()
    theme.apply_theme("light")
    QTest.mouseClick(card.yes, Qt.MouseButton.LeftButton)
    assert answers == [("q1", "yes")] and not dialog.isVisible()

    router.on_question_asked(SshQuestion("q2", 0, PROMPT, KIND_CONFIRM, host="devbox"))
    assert dialog.isVisible()
    QTest.keyClick(dialog, Qt.Key.Key_Escape)
    assert refusals == ["q2"] and not dialog.isVisible() and not dialog.questions.cards

    router.on_question_asked(SshQuestion("q3", 7, PROMPT, KIND_CONFIRM))  # a chat's: its pane
    assert list(in_pane.cards) == ["q3"] and not dialog.isVisible()
    router.on_question_asked(SshQuestion("q4", 8, PROMPT, KIND_CONFIRM))  # no pane: refused
    assert refusals == ["q2", "q4"]
