"""Honest status (issue 17, item 2): Stop/Restart enabled only while the current chat runs, a quit
box that counts runs live, a watchdog notice that says the real silence; and the Shortcuts page
lists every shortcut of the window."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import fake_manifest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QMessageBox, QTableWidget
from pytestqt.qtbot import QtBot
from ui.settingshelpers import child, close_preferences, open_preferences
from ui.uihelpers import AppDriver, processes_of

from tolaria.config.settings import Settings
from tolaria.ui.composer.notices import silence_text
from tolaria.ui.window.actions import FIXED_SHORTCUTS
from tolaria.ui.window.quit_prompt import running_sentence

Start = Callable[..., AppDriver]


def test_stop_and_restart_are_enabled_only_while_the_current_chat_runs(
        start_app: Start, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    window = drv.window
    assert not window.stop_action.isEnabled()
    assert not window.restart_action.isEnabled()
    assert not window.stop_all_action.isEnabled()
    running_chat = drv.pane.conversation_id
    stream_id = drv.send("long")
    assert window.stop_action.isEnabled() and window.restart_action.isEnabled()
    assert window.stop_all_action.isEnabled()
    drv.wait_tool_running(stream_id)
    # Another chat: nothing runs there, but a run goes on elsewhere.
    before = window.sidebar.list.count()
    window.new_action.trigger()
    qtbot.waitUntil(lambda: window.sidebar.list.count() == before + 1)
    assert window.current_conversation_id() != running_chat
    assert not window.stop_action.isEnabled() and not window.restart_action.isEnabled()
    assert window.stop_all_action.isEnabled()
    window.open_conversation(running_chat)
    assert window.stop_action.isEnabled()
    window.stop_action.trigger()
    drv.wait_finished()
    assert not window.stop_action.isEnabled() and not window.stop_all_action.isEnabled()
    assert processes_of(stream_id) == []


def test_the_quit_box_counts_the_runs_live(start_app: Start, qtbot: QtBot,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    window = drv.window
    first = drv.send("one")
    first_chat = drv.pane.conversation_id
    before = window.sidebar.list.count()
    window.new_action.trigger()
    qtbot.waitUntil(lambda: window.sidebar.list.count() == before + 1)
    second = drv.send("two")
    drv.wait_tool_running(second)
    drv.wait_tool_running(first, window.stack.pane(first_chat))
    window.close()
    box = window.findChild(QMessageBox, "quitDialog")
    assert box is not None and box.isVisible()
    assert box.text() == "2 chats are still running. Stop and quit?"
    assert box.icon() == QMessageBox.Icon.NoIcon
    drv.app.controller.stop_all()
    qtbot.waitUntil(lambda: window.running_count() == 0, timeout=15_000)
    assert box.text() == "No chat is running any more."
    assert processes_of(first) == [] and processes_of(second) == []
    box.button(QMessageBox.StandardButton.Cancel).click()
    qtbot.waitUntil(lambda: window.findChild(QMessageBox, "quitDialog") is None)


def test_running_sentence() -> None:
    assert running_sentence(1) == "1 chat is still running. Stop and quit?"
    assert running_sentence(3) == "3 chats are still running. Stop and quit?"
    assert running_sentence(0) == "No chat is running any more."


def test_the_watchdog_notice_counts_the_real_silence(
        start_app: Start, home: Path, tmp_path: Path, qtbot: QtBot) -> None:
    (home / "settings.toml").write_text("[behaviour]\nwatchdog_seconds = 0.3\n")
    drv = start_app()
    drv.use_agent(fake_manifest("hang_once", env={"FAKE_ONCE_FILE": str(tmp_path / "once")}))
    drv.send("please do it")
    notice = drv.pane.watchdog
    qtbot.waitUntil(notice.isVisible, timeout=5_000)
    qtbot.waitUntil(lambda: "No output for 2 s" in notice.text(), timeout=5_000)
    shown = re.search(r"No output for (\d+) s", notice.text())
    assert shown is not None and abs(int(shown.group(1)) - notice.silence()) < 1.5
    drv.window.stop_action.trigger()
    drv.wait_finished()
    assert not notice.isVisible()


def test_silence_text() -> None:
    assert silence_text(15.7) == "15 s"
    assert silence_text(0.34) == "0.3 s"
    assert silence_text(60) == "1 min"
    assert silence_text(125) == "2 min 5 s"


def test_the_shortcuts_page_lists_every_shortcut(start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    dialog = open_preferences(drv)
    dialog.tabs.setCurrentWidget(dialog.shortcuts)
    table = child(dialog, QTableWidget, "fixedShortcuts")
    cells = [[table.item(r, c) for c in (0, 1)] for r in range(table.rowCount())]
    rows = {(label.text(), keys.text()) for label, keys in cells
            if label is not None and keys is not None}
    assert len(rows) == table.rowCount()
    assert rows == {(f.label, f.keys) for f in FIXED_SHORTCUTS}
    assert table.editTriggers() == QTableWidget.EditTrigger.NoEditTriggers
    listed = {keys for _label, keys in rows} | {
        getattr(Settings(), attr) for attr in
        ("stop_shortcut", "stop_all_shortcut", "new_chat_shortcut")}
    # Every window action with a shortcut appears (configurable ones above, fixed ones here).
    for action in drv.window.registry.actions():
        keys = action.shortcut().toString()
        if keys:
            assert keys in listed, keys
    close_preferences(drv, dialog, qtbot)


def test_a_background_notice_is_plain_text(start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    first_chat = drv.pane.conversation_id
    before = drv.window.sidebar.list.count()
    drv.window.new_action.trigger()
    qtbot.waitUntil(lambda: drv.window.sidebar.list.count() == before + 1)
    pane = drv.window.stack.pane(first_chat)
    assert pane is not None
    drv.app.controller.send(first_chat, "in the background")
    qtbot.waitUntil(lambda: bool(drv.window.notifier.last_notice), timeout=10_000)
    message = drv.window.statusBar().currentMessage()
    assert message.startswith("Background chat “")
    assert all(ord(char) < 0x2500 for char in message), "no emoji: it would be a box"


def test_ctrl_r_restarts_from_anywhere_in_the_window(
        start_app: Start, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    first = drv.send("long")
    drv.wait_tool_running(first)
    chats = drv.window.sidebar.list
    chats.setFocus()
    qtbot.waitUntil(chats.hasFocus)
    QTest.keyClick(chats, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: drv.pane.running_stream not in (None, first), timeout=10_000)
    assert processes_of(first) == [], "the abandoned attempt's tree is gone"
    drv.window.stop_action.trigger()
    drv.wait_finished()
