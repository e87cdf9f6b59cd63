"""Keyboard-first window: the command palette, F2/Del/Ctrl+R from anywhere, Ctrl+Tab and Ctrl+1..9,
the chat search, inline rename and the inline delete confirm (issue 17, items 1 and 3)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QShortcut
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QInputDialog, QMessageBox, QWidget
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver

from tolaria.ui.transcript.permission_card import ANSWER_SHORTCUT
from tolaria.ui.window.actions import PALETTE_SHORTCUT_2, plain_text, shortcut_text

Start = Callable[..., AppDriver]


def _has_rows(drv: AppDriver, count: int) -> bool:
    return drv.window.sidebar.list.count() == count


def _three_chats(drv: AppDriver, qtbot: QtBot) -> list[int]:
    """Three conversations named one, two, three (the sidebar lists the newest first)."""
    window = drv.window
    for count in (2, 3):
        window.new_action.trigger()
        qtbot.waitUntil(partial(_has_rows, drv, count))
    ids = window.sidebar.ids()
    for cid, title in zip(ids, ("three", "two", "one"), strict=True):
        window.rename_requested.emit(cid, title)
    qtbot.waitUntil(lambda: [window.sidebar.list.item(i).text() for i in range(3)]
                    == ["three", "two", "one"])
    return ids


def _somewhere_not_editable(drv: AppDriver, qtbot: QtBot) -> QWidget:
    """The header's folder button: a widget far from the sidebar that takes no text."""
    button = drv.window.header.folder_button
    button.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is button)
    return button


def test_the_palette_lists_every_action_with_its_shortcut_and_runs_the_chosen_one(
        start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    window = drv.window
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier)
    palette = window.command_palette
    qtbot.waitUntil(palette.isVisible)
    listed = palette.visible_texts()
    for action in window.registry.actions():
        keys = shortcut_text(action)
        entry = f"{plain_text(action)}\t{keys}" if keys else plain_text(action)
        assert entry in listed, entry
    assert any(text.startswith("Rename") and "F2" in text for text in listed)
    assert any(text.startswith("Restart turn") and "Ctrl+R" in text for text in listed)
    # Fuzzy: "nwch" finds "New chat" first.
    QTest.keyClicks(palette.field, "nwch")
    assert palette.visible_texts()[0].startswith("New chat")
    QTest.keyClicks(palette.field, "zzz")
    assert palette.visible_texts() == []
    assert palette.empty.isVisibleTo(palette)
    palette.field.clear()
    QTest.keyClicks(palette.field, "new chat")
    before = window.sidebar.list.count()
    QTest.keyClick(palette.field, Qt.Key.Key_Return)
    assert not palette.isVisible()
    qtbot.waitUntil(lambda: window.sidebar.list.count() == before + 1)


def test_the_palette_shows_disabled_actions_but_does_not_run_them(
        start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    window = drv.window
    assert not window.stop_action.isEnabled()
    window.palette_action.trigger()
    qtbot.waitUntil(window.command_palette.isVisible)
    QTest.keyClicks(window.command_palette.field, "stop")
    item = window.command_palette.list.item(0)
    assert item.text().startswith("Stop")
    assert not item.flags() & Qt.ItemFlag.ItemIsEnabled
    QTest.keyClick(window.command_palette.field, Qt.Key.Key_Escape)
    assert not window.command_palette.isVisible()


def test_f2_renames_in_place_from_anywhere_enter_commits_esc_cancels(
        start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    window = drv.window
    cid = drv.pane.conversation_id
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_F2)  # from the composer, not the sidebar
    qtbot.waitUntil(lambda: window.sidebar.renaming() is not None)
    editor = window.sidebar.renaming()
    assert editor is not None
    assert window.findChild(QInputDialog) is None, "no stock input box"
    assert editor.selectedText() == editor.text()
    QTest.keyClicks(editor, "Release notes")
    QTest.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.sidebar.list.item(0).text() == "Release notes")
    stored = drv.app.store.get_conversation(cid)
    assert stored is not None and stored.title == "Release notes"

    QTest.keyClick(_somewhere_not_editable(drv, qtbot), Qt.Key.Key_F2)
    qtbot.waitUntil(lambda: window.sidebar.renaming() is not None)
    editor = window.sidebar.renaming()
    assert editor is not None
    QTest.keyClicks(editor, "Thrown away")
    QTest.keyClick(editor, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: window.sidebar.renaming() is None)
    stored = drv.app.store.get_conversation(cid)
    assert stored is not None and stored.title == "Release notes"
    assert window.sidebar.list.item(0).text() == "Release notes"


def test_del_in_the_composer_deletes_a_character_not_the_chat(
        start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    composer = drv.pane.composer
    composer.setFocus()
    QTest.keyClicks(composer, "abc")
    QTest.keyClick(composer, Qt.Key.Key_Home)
    QTest.keyClick(composer, Qt.Key.Key_Delete)
    assert composer.toPlainText() == "bc"
    assert not drv.window.sidebar.confirm.isVisible()


def test_del_from_anywhere_asks_inline_esc_cancels_delete_deletes(
        start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    window = drv.window
    ids = _three_chats(drv, qtbot)
    window.open_conversation(ids[1])  # "two"
    focus = _somewhere_not_editable(drv, qtbot)
    QTest.keyClick(focus, Qt.Key.Key_Delete)
    confirm = window.sidebar.confirm
    qtbot.waitUntil(confirm.isVisible)
    assert window.findChild(QMessageBox) is None, "no stock message box"
    assert "“two”" in confirm.label.text()
    assert QApplication.focusWidget() is confirm.reject_button, "the safe answer has the focus"
    QTest.keyClick(confirm.reject_button, Qt.Key.Key_Escape)
    assert not confirm.isVisible()
    assert window.sidebar.ids() == ids
    qtbot.waitUntil(lambda: QApplication.focusWidget() is drv.pane.composer)

    QTest.keyClick(_somewhere_not_editable(drv, qtbot), Qt.Key.Key_Delete)
    qtbot.waitUntil(confirm.isVisible)
    confirm.accept_button.click()
    qtbot.waitUntil(lambda: ids[1] not in window.sidebar.ids())
    assert drv.app.store.get_conversation(ids[1]) is None
    assert window.sidebar.ids() == [ids[0], ids[2]]


def test_ctrl_tab_cycles_and_ctrl_number_jumps(start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    window = drv.window
    ids = _three_chats(drv, qtbot)
    window.open_conversation(ids[0])
    composer = drv.pane.composer
    QTest.keyClick(composer, Qt.Key.Key_Tab, Qt.KeyboardModifier.ControlModifier)
    assert window.current_conversation_id() == ids[1]
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_Tab, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_Tab, Qt.KeyboardModifier.ControlModifier)
    assert window.current_conversation_id() == ids[0], "wraps around"
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_Backtab,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert window.current_conversation_id() == ids[2]
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    assert window.current_conversation_id() == ids[1]
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_9, Qt.KeyboardModifier.ControlModifier)
    assert window.current_conversation_id() == ids[1], "no ninth chat: nothing happens"


def test_chat_search_filters_by_title_and_enter_opens_the_match(
        start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    window = drv.window
    ids = _three_chats(drv, qtbot)
    window.open_conversation(ids[0])
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_F,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    search = window.sidebar.search
    qtbot.waitUntil(lambda: QApplication.focusWidget() is search)
    QTest.keyClicks(search, "TW")
    assert window.sidebar.visible_ids() == [ids[1]]
    QTest.keyClicks(search, "x")
    assert window.sidebar.visible_ids() == []
    assert window.sidebar.no_match.isVisibleTo(window.sidebar)
    QTest.keyClick(search, Qt.Key.Key_Backspace)
    QTest.keyClick(search, Qt.Key.Key_Return)
    assert window.current_conversation_id() == ids[1]
    qtbot.waitUntil(lambda: QApplication.focusWidget() is drv.pane.composer)
    # Ctrl+1 counts the chats the search leaves shown.
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    assert window.current_conversation_id() == ids[1]
    search.clear()
    assert window.sidebar.visible_ids() == ids


def test_in_the_search_down_enters_the_list_and_esc_clears_without_stopping(
        start_app: Start, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    window = drv.window
    ids = _three_chats(drv, qtbot)
    window.open_conversation(ids[2])
    stream_id = drv.send("keep running")
    drv.wait_tool_running(stream_id)
    search = window.sidebar.search
    window.search_action.trigger()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is search)
    QTest.keyClicks(search, "o")  # "two" and "one"
    QTest.keyClick(search, Qt.Key.Key_Escape)
    assert search.text() == "" and window.sidebar.visible_ids() == ids
    assert drv.pane.running_stream == stream_id, "Esc cleared the search, it did not stop"
    qtbot.waitUntil(lambda: QApplication.focusWidget() is drv.pane.composer)
    window.search_action.trigger()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is search)
    QTest.keyClicks(search, "t")  # "three" and "two"
    QTest.keyClick(search, Qt.Key.Key_Down)
    assert QApplication.focusWidget() is window.sidebar.list
    assert window.current_conversation_id() == ids[0]
    window.stop_all_action.trigger()
    drv.wait_finished(window.stack.pane(ids[2]))


def test_ctrl_shift_p_opens_the_palette_too(start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    QTest.keyClick(drv.pane.composer, Qt.Key.Key_P,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    palette = drv.window.command_palette
    qtbot.waitUntil(palette.isVisible)
    assert plain_text(drv.window.new_action) in "\n".join(palette.visible_texts())
    QTest.keyClick(palette.field, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not palette.isVisible())


def test_no_two_window_shortcuts_share_a_key(start_app: Start) -> None:
    """Every key bound in the window (its actions, the chat's permission key) does one thing."""
    drv = start_app()
    bound: dict[str, list[str]] = {}
    for action in drv.window.findChildren(QAction):
        for key in action.shortcuts():
            bound.setdefault(key.toString(), []).append(plain_text(action))
    for shortcut in drv.pane.findChildren(QShortcut):
        bound.setdefault(shortcut.key().toString(), []).append("permission question")
    assert ANSWER_SHORTCUT in bound and PALETTE_SHORTCUT_2 in bound
    shared = {key: names for key, names in bound.items() if len(names) > 1}
    assert shared == {}
