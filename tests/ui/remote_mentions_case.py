"""``@`` in a chat on a real ssh host, run as the non-root local user by
tests/remote/test_remote_mentions.py (``TOLARIA_MENTIONS_CASE``: a JSON file; not collected on
its own: the name does not start with ``test_``).

The real window (offscreen): a chat on the host ``target`` with a folder there; ``@`` says it is
listing on the host while ssh asks about the unknown host key in the chat's card (the window's
askpass, ADR 0033); Yes, and the host's files are offered; Enter inserts one. What it saw goes
to the case's ``out`` file, pictures to its ``shots`` folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, save_shot

from tolaria.chats.mentions.hosted import hosted_where
from tolaria.qt.mention_source import shared_source

CASE = os.environ.get("TOLARIA_MENTIONS_CASE", "")
pytestmark = pytest.mark.skipif(not CASE, reason="run by tests/remote/test_remote_mentions.py")


def test_case(start_app: Callable[..., AppDriver], qtbot: QtBot, home: Path) -> None:
    cfg = json.loads(Path(CASE).read_text())
    (home / "settings.toml").write_text(f'[remote]\nssh_config = "{cfg["ssh_config"]}"\n')
    drv = start_app()
    # The look at the host's agents (ADR 0034) does not ask here: the only question is the
    # listing's.
    drv.app.preferences.hosts.askpass = None
    chat = drv.pane.conversation_id
    assert drv.app.controller.engine.set_host(chat, "target", cfg["folder"]) is None
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).host == "target")
    drv.window.open_conversation(chat)
    pane, assist = drv.pane, drv.pane.assist
    pane.composer.setFocus()
    QTest.keyClicks(pane.composer, "read @")
    listing = assist.list.accessibleName()
    questions = pane.ssh_questions
    qtbot.waitUntil(lambda: bool(questions.cards) or assist.list.accessibleName() != listing,
                    timeout=40_000)
    assert questions.cards, assist.list.accessibleName()  # ssh's reason, when it did not ask
    card = next(iter(questions.cards.values()))
    asked = {"kind": card.question.kind, "prompt": card.prompt.text()}
    save_shot(drv.window, Path(cfg["shots"]), "remote-mentions-asked.png")
    QTest.mouseClick(card.yes, Qt.MouseButton.LeftButton)
    where = hosted_where("target", cfg["folder"])
    qtbot.waitUntil(lambda: shared_source().known(where) is not None, timeout=60_000)
    pane.composer.setFocus()
    QTest.keyClicks(pane.composer, "app")
    qtbot.waitUntil(lambda: assist.list.isVisible() and bool(assist.list.rows()))
    rows = [row.value for row in assist.list.rows()]
    title = assist.list.accessibleName()
    save_shot(drv.window, Path(cfg["shots"]), "remote-mentions-ssh.png")
    QTest.keyClick(pane.composer, Qt.Key.Key_Return)
    known = shared_source().known(where)
    assert known is not None
    Path(cfg["out"]).write_text(json.dumps({
        "listing": listing, "asked": asked, "rows": rows, "title": title,
        "text": pane.composer.toPlainText(), "files": sorted(known.listing.files),
        "open_cards": len(questions.cards)}))
