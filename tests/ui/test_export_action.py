"""File → Export chat… (issue 27 item 4): a save dialog opened without a nested loop, the export
written off the GUI thread, the status line saying where it went or why not."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMenu
from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp

from tolaria.chats.export import export_to_file
from tolaria.core.store.db import Store
from tolaria.qt import export_control
from tolaria.ui.window.actions import plain_text
from tolaria.ui.window.export_dialog import file_stem


def test_export_from_the_file_menu(start_app: StartApp, qtbot: QtBot, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[threading.Thread] = []

    def recorded(store: Store, chat: int, fmt: str, path: Path) -> Path:
        threads.append(threading.current_thread())
        return export_to_file(store, chat, fmt, path)

    monkeypatch.setattr(export_control, "export_to_file", recorded)
    drv = start_app()
    window = drv.window
    action = window.export_action
    file_menu = window.menuBar().actions()[0].menu()
    assert isinstance(file_menu, QMenu) and action in file_menu.actions()
    assert action in window.registry.actions(), "in the command palette too"
    assert plain_text(action) == "Export chat"
    drv.send("list the files <b>now</b>")
    drv.wait_finished()

    action.trigger()
    dialog = window.export_dialog.dialog
    qtbot.waitUntil(dialog.isVisible)
    assert dialog.selectedFiles()[0].endswith(".html")
    dialog.selectNameFilter("Markdown (*.md)")
    dialog.filterSelected.emit("Markdown (*.md)")
    assert dialog.selectedFiles()[0].endswith(".md")
    target = tmp_path / "exported.json"
    dialog.selectFile(str(target))
    dialog.accept()
    qtbot.waitUntil(lambda: window.statusBar().currentMessage().startswith("Chat exported"),
                    timeout=10_000)
    assert window.statusBar().currentMessage() == f"Chat exported to {target}"
    assert threads and threads[0] is not threading.main_thread(), "off the GUI thread"
    doc = json.loads(target.read_text())
    assert doc["turns"][0]["prompt"] == "list the files <b>now</b>"

    window.export_requested.emit(drv.pane.conversation_id, "html",
                                 str(tmp_path / "missing" / "x.html"))
    qtbot.waitUntil(lambda: "not exported" in window.statusBar().currentMessage(),
                    timeout=10_000)
    assert window.statusBar().currentMessage() == \
        f"The chat was not exported: {tmp_path / 'missing'} does not exist"


def test_file_names_from_titles() -> None:
    assert file_stem("Fix the parser: <now>!") == "Fix-the-parser-now"
    assert file_stem("   ") == "chat"
    assert len(file_stem("x" * 200)) == 60
