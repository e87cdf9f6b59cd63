"""A message sent with attachments while the chat's turn runs (issue 26): queued with them (the
composer and its chips emptied, nothing refused), then sent with them when the turn ends."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot
from ui.test_attachments_window import _drop
from ui.uihelpers import AppDriver, StartApp, save_shot

from tolaria.ui.composer.attachment_chip import READY


def _queue_with_a_file(drv: AppDriver, qtbot: QtBot, tmp_path: Path, text: str) -> str:
    """A turn runs (its tool for a minute); a file dropped and ``text`` sent meanwhile."""
    pane = drv.pane
    first = drv.send("busy")
    drv.wait_tool_running(first)
    (tmp_path / "notes.txt").write_text("remember the milk\n")
    _drop(pane.composer, [tmp_path / "notes.txt"])
    qtbot.waitUntil(lambda: [c.state for c in pane.attachments.chips.values()] == [READY],
                    timeout=10_000)
    pane.composer.setPlainText(text)
    QTest.keyClick(pane.composer, Qt.Key.Key_Return)
    return first


def test_a_message_with_a_file_queues_with_it(start_app: StartApp, qtbot: QtBot,
                                              tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    pane = drv.pane
    first = _queue_with_a_file(drv, qtbot, tmp_path, "and read this")
    store = drv.app.store
    qtbot.waitUntil(lambda: len(store.queued(pane.conversation_id)) == 1, timeout=5_000)
    [message] = store.queued(pane.conversation_id)
    assert message.text == "and read this"
    assert [a.name for a in message.attachments] == ["notes.txt"]
    assert pane.composer.toPlainText() == "" and not pane.attachments.chips
    assert pane.running_stream == first, "queueing never touches the running turn"
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0")
    drv.button("stopButton").click()
    qtbot.waitUntil(lambda: pane.running_stream not in (None, first), timeout=10_000)
    second = pane.running_stream
    drv.wait_finished()
    turn = store.turn_by_stream(second or "")
    assert turn is not None and turn.prompt == "and read this"
    assert [a.name for a in store.attachments(turn.id)] == ["notes.txt"]
    assert store.queued(pane.conversation_id) == []


def test_taking_a_queued_message_back_brings_its_files_back(
        start_app: StartApp, qtbot: QtBot, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    pane = drv.pane
    _queue_with_a_file(drv, qtbot, tmp_path, "later")
    qtbot.waitUntil(lambda: len(pane.queued_chips.chips()) == 1, timeout=5_000)
    [chip] = pane.queued_chips.chips()
    assert [a.name for a in chip.message.attachments] == ["notes.txt"]
    assert chip.files.text() == "+ 1 file" and chip.files.toolTip() == "Sent with it: notes.txt"
    assert "with 1 attached file" in chip.accessibleName()
    save_shot(pane, tmp_path, "queued-with-a-file.png")
    chip.edit_requested.emit(chip.message.id, chip.message.text)
    qtbot.waitUntil(lambda: pane.queued_chips.chips() == [], timeout=5_000)
    assert pane.composer.toPlainText() == "later"
    assert [(c.state, c.name) for c in pane.attachments.chips.values()] == [(READY, "notes.txt")]
    drv.button("stopButton").click()
    drv.wait_finished()
