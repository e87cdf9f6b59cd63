"""A chat's "keep running when disconnected" in the window (ADR 0032): offered in the Host menu
once the chat is on a host, stored with the chat, shown checked again when the chat is
reopened; a chat on this computer has nothing to keep. Picture: ``TOLARIA_DOCS_SHOTS=1``
(docs/chat-keep-running.png)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver, save_shot

from tolaria.ui.chat.header import ChatHeader

StartApp = Callable[..., AppDriver]
KEEP = "Keep running when disconnected"


def _menu(header: ChatHeader) -> dict[str, bool]:
    menu = header.host_button.menu()
    menu.aboutToShow.emit()
    return {a.text(): a.isChecked() for a in menu.actions() if a.text()}


def _pick(header: ChatHeader, text: str) -> None:
    menu = header.host_button.menu()
    menu.aboutToShow.emit()
    [action] = [a for a in menu.actions() if a.text() == text]
    action.trigger()


def test_keep_running_is_a_choice_of_a_chat_on_a_host(start_app: StartApp, home: Path,
                                                      tmp_path: Path, qtbot: QtBot) -> None:
    (home / "settings.toml").write_text(
        f'[hosts."box"]\ncommand = "env"\npython = "{sys.executable}"\n'
        f'cache_dir = "{tmp_path / "cache"}"\n')
    drv = start_app()
    header, chat = drv.window.header, drv.pane.conversation_id
    assert KEEP not in _menu(header), "nothing to keep on this computer"
    _pick(header, "box")
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).host == "box")
    assert _menu(header)[KEEP] is False
    _pick(header, KEEP)
    qtbot.waitUntil(lambda: drv.stored_conversation(chat).keep_running)
    assert _menu(header)[KEEP] is True
    header.host_button.menu().aboutToShow.emit()
    save_shot(header, tmp_path, "chat-keep-running.png")

    other = drv.app.controller.new_conversation("demo", str(tmp_path))
    drv.window.open_conversation(other.id)
    qtbot.waitUntil(lambda: drv.pane.conversation_id == other.id)
    assert KEEP not in _menu(header)
    drv.window.open_conversation(chat)
    qtbot.waitUntil(lambda: drv.pane.conversation_id == chat)
    assert _menu(header)[KEEP] is True, "kept with the chat"
    _pick(header, KEEP)
    qtbot.waitUntil(lambda: not drv.stored_conversation(chat).keep_running)
