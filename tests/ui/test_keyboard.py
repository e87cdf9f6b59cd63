"""Keyboard: focus, Enter/Shift+Enter, Ctrl+N, the configurable stop shortcut, object names."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QLabel,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QWidget,
)
from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp, assert_only_ctrl_period_stops

from tolaria.config.settings import Settings, load_settings, save_settings


def test_focus_starts_in_the_composer_and_widgets_are_named(
        start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    drv.window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is drv.pane.composer)
    window = drv.window
    for cls, name in ((QPlainTextEdit, "composer"), (QPushButton, "sendButton"),
                      (QListWidget, "conversationList"), (QComboBox, "agentPicker"),
                      (QPushButton, "newChatButton")):
        widget = window.findChild(cls, name)
        assert widget is not None, name
        assert widget.accessibleName(), f"{name} needs an accessible name"
    transcript = window.findChild(QWidget, "transcript")
    assert transcript is not None and transcript.accessibleName() == "Transcript"


def test_enter_sends_and_shift_enter_adds_a_line(start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    composer = drv.pane.composer
    composer.setFocus()
    QTest.keyClicks(composer, "hello")
    QTest.keyClick(composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    QTest.keyClicks(composer, "world")
    assert composer.toPlainText() == "hello\nworld"
    assert drv.pane.running_stream is None
    QTest.keyClick(composer, Qt.Key.Key_Return)
    assert drv.pane.running_stream is not None
    assert composer.toPlainText() == ""
    turn = drv.wait_finished()
    assert drv.stored_turn(turn.stream_id).prompt == "hello\nworld"
    # Enter on an empty composer sends nothing.
    QTest.keyClick(composer, Qt.Key.Key_Return)
    assert drv.pane.running_stream is None


def test_ctrl_n_opens_a_new_chat_with_focus_in_its_composer(
        start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    drv.send("first")
    drv.wait_finished()
    before = drv.pane
    drv.window.activateWindow()
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: drv.window.current_pane() is not before)
    assert drv.window.sidebar.list.count() == 2
    assert drv.window.sidebar.current_id() == drv.pane.conversation_id
    qtbot.waitUntil(lambda: QApplication.focusWidget() is drv.pane.composer)
    assert drv.pane.turn_views() == []


def test_the_stop_shortcut_comes_from_settings(
        start_app: StartApp, home: Path, monkeypatch: pytest.MonkeyPatch, qtbot: QtBot) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    (home / "settings.toml").write_text('[shortcuts]\nstop = "Ctrl+."\n')
    drv = start_app()
    assert drv.window.stop_action.shortcut().toString() == "Ctrl+."
    assert_only_ctrl_period_stops(drv, "custom stop key")


@pytest.mark.parametrize("content", ["this is [not toml", '[shortcuts]\nstop = "NoSuchKey+Q+W"\n',
                                     "shortcuts = 3\n"])
def test_broken_settings_use_defaults_and_say_so(
        start_app: StartApp, home: Path, content: str) -> None:
    (home / "settings.toml").write_text(content)
    drv = start_app()
    assert drv.window.stop_action.shortcut().toString() == "Esc"
    problems = drv.window.findChild(QLabel, "settingsProblems")
    assert problems is not None and problems.isVisible()
    assert "settings" in problems.text() or "shortcuts" in problems.text()


def test_settings_round_trip_atomically(home: Path) -> None:
    save_settings(Settings(stop_shortcut="Ctrl+.", stop_all_shortcut="Ctrl+Shift+."))
    assert load_settings() == (Settings("Ctrl+.", "Ctrl+Shift+."), [])
    assert [p.name for p in home.iterdir()] == ["settings.toml"]  # no temp file left behind
