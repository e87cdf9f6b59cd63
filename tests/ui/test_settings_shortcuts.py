"""Preferences > Shortcuts: a changed stop shortcut works at once, the old one stops nothing;
conflicts keep Save disabled; the send key can be Ctrl+Enter."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QComboBox, QKeySequenceEdit, QLabel, QPushButton
from pytestqt.qtbot import QtBot
from ui.settingshelpers import child, close_preferences, open_preferences
from ui.uihelpers import StartApp, assert_only_ctrl_period_stops

from tolaria.config.settings import load_settings


@pytest.fixture
def long_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")


@pytest.mark.usefixtures("long_tool")
def test_a_changed_stop_shortcut_works_and_the_old_one_does_not(
        start_app: StartApp, qtbot: QtBot, home: Path) -> None:
    drv = start_app()
    dialog = open_preferences(drv)
    dialog.tabs.setCurrentWidget(dialog.shortcuts)
    edit = child(dialog, QKeySequenceEdit, "stopShortcut")
    edit.setFocus()
    QTest.keyClick(edit, Qt.Key.Key_Period, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: edit.keySequence() == QKeySequence("Ctrl+."))
    child(dialog, QPushButton, "settingsSave").click()
    assert load_settings()[0].stop_shortcut == "Ctrl+."
    assert drv.window.stop_action.shortcut() == QKeySequence("Ctrl+.")
    close_preferences(drv, dialog, qtbot)

    assert_only_ctrl_period_stops(drv, "run the long tool")


def test_conflicting_shortcuts_are_shown_and_block_save(
        start_app: StartApp, qtbot: QtBot, home: Path) -> None:
    drv = start_app()
    dialog = open_preferences(drv)
    dialog.tabs.setCurrentWidget(dialog.shortcuts)
    save = child(dialog, QPushButton, "settingsSave")
    conflicts = child(dialog, QLabel, "shortcutConflicts")
    assert save.isEnabled() and conflicts.isHidden()
    child(dialog, QKeySequenceEdit, "stopShortcut").setKeySequence(QKeySequence("Shift+Esc"))
    assert not conflicts.isHidden() and conflicts.text()
    assert not save.isEnabled()
    save.click()
    assert not (home / "settings.toml").exists()
    child(dialog, QPushButton, "stopShortcutDefault").click()
    assert conflicts.isHidden() and save.isEnabled()


def test_ctrl_enter_sends_when_chosen(start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    dialog = open_preferences(drv)
    send = child(dialog, QComboBox, "sendShortcut")
    send.setCurrentIndex(send.findData("Ctrl+Enter"))
    child(dialog, QPushButton, "settingsSave").click()
    close_preferences(drv, dialog, qtbot)
    composer = drv.pane.composer
    composer.setFocus()
    QTest.keyClicks(composer, "one")
    QTest.keyClick(composer, Qt.Key.Key_Return)
    QTest.keyClicks(composer, "two")
    assert composer.toPlainText() == "one\ntwo" and drv.pane.running_stream is None
    QTest.keyClick(composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert drv.pane.running_stream is not None
    turn = drv.wait_finished()
    assert drv.stored_turn(turn.stream_id).prompt == "one\ntwo"
