"""One window answering ssh's own question, run as the non-root local user by
tests/remote/test_askpass_window.py (``TOLARIA_ASKPASS_CASE``: a JSON file; not collected on its
own: the name does not start with ``test_``).

The real window (offscreen): a chat on the host ``target`` of the case's ssh config sends a
prompt; ssh's question appears as a card in the chat with ssh's words; the case clicks Yes or No
or types the passphrase into the masked field, waits for the turn's end, and writes what it saw
to the case's ``out`` file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, save_shot

from tolaria.core.adapters.manifest import Manifest
from tolaria.core.events import Error
from tolaria.core.remote.discover import HostAgents
from tolaria.ui import theme
from tolaria.ui.chat.ssh_question import SshQuestions

CASE = os.environ.get("TOLARIA_ASKPASS_CASE", "")
FAKE_AGENT = Path(__file__).resolve().parents[1] / "fakes" / "fake_agent.py"
pytestmark = pytest.mark.skipif(not CASE, reason="run by tests/remote/test_askpass_window.py")


def test_case(start_app: Callable[..., AppDriver], qtbot: QtBot, home: Path) -> None:
    cfg = json.loads(Path(CASE).read_text())
    (home / "settings.toml").write_text(f'[remote]\nssh_config = "{cfg["ssh_config"]}"\n')
    drv = start_app()
    if cfg.get("mode", "turn") != "turn":
        _look(drv, qtbot, cfg)
        return
    drv.use_agent(Manifest(id="fake-remote", name="Fake agent (remote)",
                           protocol="claude-stream-json",
                           command=("python3", str(FAKE_AGENT), "normal", "{prompt}")))
    chat = drv.pane.conversation_id
    drv.app.controller.set_host(chat, cfg["host"])
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).host == cfg["host"])
    drv.window.open_conversation(chat)
    questions = drv.pane.ssh_questions
    # The picker's look at the host's agents asks first (ADR 0034): refused here, so the
    # questions below are the turn's own.
    found: list[HostAgents] = []
    drv.app.preferences.hosts.host_agents_found.connect(lambda _h, answer: found.append(answer))
    _answer(qtbot, questions, "no")
    qtbot.waitUntil(lambda: bool(found), timeout=40_000)
    assert found[0].error, "the refused look says why"
    stream_id = drv.send("hello over ssh")
    asked: list[dict[str, str]] = []
    for answer in cfg["answers"]:
        qtbot.waitUntil(lambda: bool(questions.cards), timeout=40_000)
        card = next(iter(questions.cards.values()))
        asked.append({"prompt": card.prompt.text(), "kind": card.question.kind})
        assert card.isVisible()
        if cfg.get("shots"):
            for name in ("light", "dark"):
                theme.apply_theme(name)
                drv.window.resize(900, 620)
                qtbot.wait(150)  # the palette change reaches every widget
                suffix = "" if name == "light" else "-dark"
                save_shot(drv.window, Path(cfg["shots"]),
                          f"ssh-question-{card.question.kind}{suffix}.png")
            theme.apply_theme("light")
        if answer in ("yes", "no"):
            QTest.mouseClick(card.yes if answer == "yes" else card.no,
                             Qt.MouseButton.LeftButton)
        else:
            assert card.field is not None
            QTest.keyClicks(card.field, answer)
            assert card.field.echoMode() == card.field.EchoMode.Password
            QTest.keyClick(card.field, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda c=card.question.id: c not in questions.cards, timeout=5_000)  # type: ignore[misc]
    turn = drv.wait_finished(timeout_ms=60_000)
    stored = drv.app.store.events(drv.stored_turn(stream_id).id)
    Path(cfg["out"]).write_text(json.dumps({
        "asked": asked, "status": turn.status, "text": turn.text(),
        "errors": [e.message for e in stored if isinstance(e, Error)],
        "open_cards": len(questions.cards)}))


def _answer(qtbot: QtBot, questions: SshQuestions, answer: str) -> dict[str, str]:
    qtbot.waitUntil(lambda: bool(questions.cards), timeout=40_000)
    card = next(iter(questions.cards.values()))
    assert card.isVisible()
    asked = {"prompt": card.prompt.text(), "kind": card.question.kind,
             "title": card.findChild(QLabel, "sshQuestionTitle").text()}  # type: ignore[union-attr]
    QTest.mouseClick(card.yes if answer == "yes" else card.no, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: card.question.id not in questions.cards, timeout=5_000)
    return asked


def _look(drv: AppDriver, qtbot: QtBot, cfg: dict[str, Any]) -> None:
    """A look at the host's agents (ADR 0034) that ssh questions: in the chat on that host
    (``look-chat``), or in a dialog when no chat on that host is shown (``look-dialog``)."""
    hosts = drv.app.preferences.hosts
    found: list[HostAgents] = []
    hosts.host_agents_found.connect(lambda _host, answer: found.append(answer))
    router = drv.window.ssh_questions
    if cfg["mode"] == "look-chat":
        chat = drv.pane.conversation_id
        drv.app.controller.set_host(chat, cfg["host"])  # the picker asks for the host's agents
        qtbot.waitUntil(lambda: drv.stored_conversation(chat).host == cfg["host"])
        drv.window.open_conversation(chat)
        questions = drv.pane.ssh_questions
    else:
        hosts.look(cfg["host"], refresh=True)  # the chat shown is on this computer
        qtbot.waitUntil(lambda: router.dialog is not None and router.dialog.isVisible(),
                        timeout=40_000)
        assert router.dialog is not None
        questions = router.dialog.questions
    asked = [_answer(qtbot, questions, answer) for answer in cfg["answers"]]
    qtbot.waitUntil(lambda: bool(found), timeout=60_000)
    # No turn runs: the pane's "waiting for your answer" leaves with the question.
    assert not drv.pane.watchdog.isVisible() and not drv.pane.watchdog.waiting
    Path(cfg["out"]).write_text(json.dumps({
        "asked": asked, "error": found[0].error,
        "agents": {d.agent: d.path for d in found[0].detections},
        "open_cards": len(questions.cards),
        "dialog_shown": router.dialog is not None and router.dialog.isVisible(),
        "pane_asked": cfg["mode"] == "look-chat" and questions is drv.pane.ssh_questions}))
