"""Host in the new-chat flow (issue 25 item 1): the "▾" beside "New chat" makes a chat on this
computer, a configured host, a recent one or a typed one (checked, the reason beside the field,
nothing made from a bad one); the plain New chat (button or Ctrl+N) keeps the current chat's
host. Pictures: docs/new-chat-host[-entry][-dark].png with ``TOLARIA_DOCS_SHOTS=1``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, save_shot

from tolaria.core.store.db import Conversation
from tolaria.ui import theme
from tolaria.ui.sidebar.new_chat_host import NewChatHostButton

StartApp = Callable[..., AppDriver]


@pytest.fixture
def box(home: Path, tmp_path: Path) -> str:
    (home / "settings.toml").write_text(
        f'[hosts."box"]\ncommand = "env"\npython = "{sys.executable}"\n')
    return "box"


def pick(button: NewChatHostButton, text: str) -> None:
    menu = button.menu()
    menu.aboutToShow.emit()
    found = [a for a in menu.actions() if a.text() == text]
    assert found, [a.text() for a in menu.actions()]
    found[0].trigger()


def newest(drv: AppDriver, qtbot: QtBot, before: int) -> Conversation:
    qtbot.waitUntil(lambda: len(drv.app.store.list_conversations()) > before)
    chat = max(drv.app.store.list_conversations(), key=lambda c: c.id)
    qtbot.waitUntil(lambda: drv.window.current_conversation_id() == chat.id)
    return chat


def count(drv: AppDriver) -> int:
    return len(drv.app.store.list_conversations())


def test_new_chat_on_a_host_and_the_plain_new_chat_keeps_it(
        start_app: StartApp, box: str, qtbot: QtBot, tmp_path: Path) -> None:
    drv = start_app()
    sidebar = drv.window.sidebar
    button = sidebar.new_host_button
    pick(button, box)
    chat = newest(drv, qtbot, 1)
    assert (chat.host, chat.cwd) == (box, None)  # the host's home until a folder is typed
    assert drv.window.header.host_button.text() == "Host: box ▾"

    before = count(drv)
    sidebar.new_button.click()  # from a remote chat's context: the same host
    assert newest(drv, qtbot, before).host == box
    before = count(drv)
    QTest.keyClick(drv.window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert newest(drv, qtbot, before).host == box

    before = count(drv)
    pick(button, "This computer")
    local = newest(drv, qtbot, before)
    assert local.host is None and local.cwd
    before = count(drv)
    sidebar.new_button.click()
    assert newest(drv, qtbot, before).host is None


def test_other_host_is_checked_beside_the_field_and_then_offered_as_recent(
        start_app: StartApp, box: str, qtbot: QtBot, tmp_path: Path) -> None:
    drv = start_app()
    button = drv.window.sidebar.new_host_button
    entry = drv.window.sidebar.new_host_entry
    before = count(drv)
    pick(button, "Other host…")
    assert entry.isVisible() and entry.edit.hasFocus()
    assert entry.label.text() == "New chat on:"
    QTest.keyClicks(entry.edit, "-oProxyCommand=touch")
    QTest.keyClick(entry.edit, Qt.Key.Key_Return)
    assert "starts with '-'" in entry.error.text()
    assert entry.error.isVisible()
    for name in ("light", "dark"):
        theme.apply_theme(name)
        qtbot.wait(50)
        save_shot(drv.window.sidebar, tmp_path,
                  f"new-chat-host-entry{'' if name == 'light' else '-dark'}.png")
    theme.apply_theme("light")
    assert count(drv) == before, "nothing made from a bad host"
    entry.edit.clear()
    QTest.keyClicks(entry.edit, "ssh://me@devbox:2222")
    QTest.keyClick(entry.edit, Qt.Key.Key_Return)
    chat = newest(drv, qtbot, before)
    assert chat.host == "ssh://me@devbox:2222" and not entry.isVisible()

    menu = button.menu()
    menu.aboutToShow.emit()
    texts = [a.text() for a in menu.actions()]
    assert texts[:2] == ["New chat on", "This computer"]
    assert box in texts and "ssh://me@devbox:2222" in texts and texts[-1] == "Other host…"
    checked = [a.text() for a in menu.actions() if a.isChecked()]
    assert checked == ["ssh://me@devbox:2222"], "the plain New chat's host is marked"
    for name in ("light", "dark"):
        theme.apply_theme(name)
        menu.popup(button.mapToGlobal(button.rect().bottomLeft()))
        qtbot.waitExposed(menu)
        qtbot.wait(50)
        save_shot(menu, tmp_path, f"new-chat-host{'' if name == 'light' else '-dark'}.png")
        menu.hide()
    theme.apply_theme("light")


def test_file_menu_opens_the_host_menu(start_app: StartApp, box: str, qtbot: QtBot) -> None:
    drv = start_app()
    menu = drv.window.sidebar.new_host_button.menu()
    drv.window.new_on_host_action.trigger()
    qtbot.waitUntil(menu.isVisible)
    assert box in [a.text() for a in menu.actions()]
    menu.hide()
