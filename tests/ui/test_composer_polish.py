"""Composer polish (issue 26 item 6) in the real window with real key events: it grows with its
text, keeps each chat's draft across a restart, Up recalls the last prompt, Ctrl+Shift+V pastes
plain text, and the size shows near the argv limit."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QMimeData, Qt, QUrl
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver

from tolaria.chats.drafts import Drafts
from tolaria.ui.composer.polish import PROMPT_BYTES


def test_up_recalls_the_earlier_prompts_only_while_empty(
        start_app: Callable[..., AppDriver], qtbot: QtBot) -> None:
    drv = start_app()
    drv.send("first")
    drv.wait_finished()
    drv.send("second")
    drv.wait_finished()
    composer = drv.pane.composer
    composer.setFocus()
    QTest.keyClick(composer, Qt.Key.Key_Up)
    assert composer.toPlainText() == "second"
    QTest.keyClick(composer, Qt.Key.Key_Up)
    assert composer.toPlainText() == "first"
    QTest.keyClick(composer, Qt.Key.Key_Up)  # the oldest stays
    assert composer.toPlainText() == "first"
    QTest.keyClick(composer, Qt.Key.Key_Down)
    assert composer.toPlainText() == "second"
    QTest.keyClick(composer, Qt.Key.Key_Down)
    assert composer.toPlainText() == ""
    QTest.keyClicks(composer, "typed")
    QTest.keyClick(composer, Qt.Key.Key_Up)  # own text: Up is the cursor's again
    assert composer.toPlainText() == "typed"


def test_ctrl_shift_v_pastes_plain_text(start_app: Callable[..., AppDriver],
                                        qtbot: QtBot) -> None:
    drv = start_app()
    composer = drv.pane.composer
    data = QMimeData()
    data.setHtml("<b>bold</b> words")
    data.setText("bold words")
    data.setUrls([QUrl.fromLocalFile("/tmp/some file.png")])
    QApplication.clipboard().setMimeData(data)
    composer.setFocus()
    QTest.keyClick(composer, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier
                   | Qt.KeyboardModifier.ShiftModifier)
    assert composer.toPlainText() == "bold words"


def test_the_composer_grows_with_its_text_up_to_a_limit(
        start_app: Callable[..., AppDriver], qtbot: QtBot) -> None:
    composer = start_app().pane.composer
    small = composer.height()
    composer.setPlainText("\n".join(["line"] * 5))
    qtbot.waitUntil(lambda: composer.height() > small)
    five = composer.height()
    composer.setPlainText("\n".join(["line"] * 200))
    qtbot.waitUntil(lambda: composer.height() > five)
    tall = composer.height()
    composer.setPlainText("\n".join(["line"] * 400))
    qtbot.wait(50)
    assert composer.height() == tall  # the limit


def test_the_size_shows_near_the_argv_limit(start_app: Callable[..., AppDriver],
                                            qtbot: QtBot) -> None:
    pane = start_app().pane
    pane.composer.setPlainText("short")
    assert not pane.budget.isVisible()
    pane.composer.setPlainText("é" * (PROMPT_BYTES // 3))  # 2 bytes each: two thirds full
    assert pane.budget.isVisible() and "KB of" in pane.budget.text()
    assert "too long" not in pane.budget.text()
    pane.composer.setPlainText("x" * (PROMPT_BYTES + 1))
    assert "too long for one argument" in pane.budget.text()


def test_a_draft_survives_a_restart(start_app: Callable[..., AppDriver], qtbot: QtBot,
                                    tmp_path: Path) -> None:
    store = tmp_path / "db" / "tolaria.sqlite3"
    store.parent.mkdir()
    drv = start_app(store_path=store)
    chat = drv.pane.conversation_id
    drv.pane.composer.setFocus()
    QTest.keyClicks(drv.pane.composer, "half a thought")
    drafts = store.parent / "drafts.json"
    qtbot.waitUntil(lambda: drafts.is_file() and Drafts(drafts).get(chat) == "half a thought",
                    timeout=5000)
    QTest.keyClicks(drv.pane.composer, ", finished")  # written at shutdown at the latest
    drv.close()
    assert json.loads(drafts.read_text())["drafts"][str(chat)] == "half a thought, finished"
    again = start_app(store_path=store)
    again.window.open_conversation(chat)
    assert again.pane.composer.toPlainText() == "half a thought, finished"
    again.send(again.pane.composer.toPlainText())
    again.wait_finished()
    qtbot.waitUntil(lambda: Drafts(drafts).get(chat) == "", timeout=5000)


def test_an_unreadable_drafts_file_is_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "drafts.json"
    path.write_text("{not json")
    drafts = Drafts(path)
    assert drafts.get(1) == "" and (tmp_path / "drafts.json.bad").is_file()
    drafts.set(1, "kept")
    drafts.save()
    assert Drafts(path).get(1) == "kept"
