"""Chats that cannot be saved are said in the window (issue 14, the window's side): one clear,
non-modal notice per problem, gone when writing works again. The app's real SQLite store is made
to fail for real: ``PRAGMA max_page_count`` caps the database file where it stands, so the next
write that needs a page fails with SQLITE_FULL, as on a full disk."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtWidgets import QApplication, QPushButton
from pytestqt.qtbot import QtBot
from ui.uihelpers import AppDriver

from tolaria.core.events import Done, TextDelta
from tolaria.core.store.db import Store

Start = Callable[..., AppDriver]


def _cap_pages(store: Store, capped: bool) -> None:
    """Cap the database file at its current size, or lift the cap."""
    with store._db_lock:
        conn = store._conn
        pages = conn.execute("PRAGMA page_count").fetchone()[0] if capped else 1 << 30
        conn.execute(f"PRAGMA max_page_count = {pages}")


def test_a_full_disk_is_one_notice_in_the_window_cleared_when_writes_work(
        start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    store = drv.app.store
    notice = drv.window.store_notice
    assert notice.text == ""
    said: list[str] = []
    drv.app.bridge.store_write_failed.connect(lambda _path, reason: said.append(reason))
    conversation = drv.pane.conversation_id
    stream_id = "ai-agent-stream-storenotice01"
    store.start_turn(conversation, stream_id, "demo", "fill the disk")
    _cap_pages(store, True)
    store.append_event(TextDelta(stream_id, text="x" * 300_000))  # pages that cannot be had
    qtbot.waitUntil(lambda: notice.text != "", timeout=5_000)
    assert notice.text.startswith(f"Could not save chats to {store.path}: disk full.")
    assert "Output still shows here" in notice.text and "free some space" in notice.text
    assert QApplication.activeModalWidget() is None, "a notice, not a dialog"
    qtbot.wait(400)  # the flusher retries every 50 ms: still one notice
    assert said == ["disk full"]
    assert store.write_error is not None

    _cap_pages(store, False)  # room again: the flusher saves what it held, the notice goes
    qtbot.waitUntil(lambda: notice.text == "", timeout=5_000)
    assert store.write_error is None
    store.append_event(Done(stream_id))
    assert [type(e).__name__ for e in store.events(store.turns(conversation)[-1].id)] == [
        "TextDelta", "Done"]


def test_a_dismissed_notice_stays_away_until_the_problem_comes_back(
        start_app: Start, qtbot: QtBot) -> None:
    drv = start_app()
    store = drv.app.store
    notice = drv.window.store_notice
    stream_id = "ai-agent-stream-storenotice02"
    store.start_turn(drv.pane.conversation_id, stream_id, "demo", "fill the disk")
    _cap_pages(store, True)
    store.append_event(TextDelta(stream_id, text="y" * 300_000))
    qtbot.waitUntil(lambda: notice.text != "", timeout=5_000)
    dismiss = notice.findChild(QPushButton, "storeNoticeDismiss")
    assert dismiss is not None
    dismiss.click()
    qtbot.wait(300)  # retries fail on: the user was told, nothing comes back
    assert notice.text == ""
    _cap_pages(store, False)
    qtbot.waitUntil(lambda: store.write_error is None, timeout=5_000)
    _cap_pages(store, True)  # a new failure after a recovery is said again
    store.append_event(TextDelta(stream_id, text="z" * 300_000))
    qtbot.waitUntil(lambda: notice.text != "", timeout=5_000)
    _cap_pages(store, False)
    qtbot.waitUntil(lambda: notice.text == "", timeout=5_000)
    store.append_event(Done(stream_id))


def test_a_turn_that_cannot_be_stored_does_not_start_and_keeps_its_prompt(
        start_app: Start, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "0.2")
    drv = start_app()
    store = drv.app.store
    notice = drv.window.store_notice
    pane = drv.pane
    _cap_pages(store, True)
    prompt = "please " + "explain " * 2_000  # a prompt that needs pages of its own
    pane.composer.setPlainText(prompt)
    drv.button("sendButton").click()
    qtbot.waitUntil(lambda: notice.text != "", timeout=5_000)
    assert "disk full" in notice.text
    assert pane.running_stream is None and store.turns(pane.conversation_id) == []
    assert pane.composer.toPlainText() == prompt, "nothing typed is lost"
    _cap_pages(store, False)
    drv.button("sendButton").click()  # room again: the same prompt goes
    assert drv.wait_finished().status == "completed"
    assert notice.text == "" and store.write_error is None
