"""Conversations survive a restart; a crash leaves turns ``interrupted``; quitting stops runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox, QPushButton
from pytestqt.qtbot import QtBot
from ui.uihelpers import StartApp, processes_of

from tolaria.core.events import TextDelta, ToolStart
from tolaria.core.store.db import Store


def test_restart_restores_conversations_and_transcripts(start_app: StartApp, qtbot: QtBot) -> None:
    first = start_app()
    first.send("remember this")
    turn = first.wait_finished()
    assert turn.status == "completed"
    answer = turn.text()
    assert "## Done" in answer
    first.window.sidebar.rename_requested.emit(first.pane.conversation_id, "Renamed chat")
    first.close()

    second = start_app()
    sidebar = second.window.sidebar
    assert sidebar.list.count() == 1
    assert sidebar.list.item(0).text() == "Renamed chat"
    restored = second.pane  # the most recent conversation is opened
    qtbot.waitUntil(lambda: bool(restored.turn_views()) and not restored.transcript.busy)
    view = restored.turn_views()[0]
    assert view.status == "completed"
    assert view.text() == answer
    assert [c.status for c in view.tool_cards()] == ["done"]
    assert "Completed" in view.footer.text()


def test_follow_up_resumes_the_agents_own_session(start_app: StartApp, qtbot: QtBot) -> None:
    drv = start_app()
    drv.send("first question")
    drv.wait_finished()
    conversation = drv.app.store.get_conversation(drv.pane.conversation_id)
    assert conversation is not None and conversation.agent_session_id
    first_session = conversation.agent_session_id
    drv.send("second question")
    turn = drv.wait_finished()
    # The demo adapter declares `resume`: the follow-up continues the same agent session
    # (`--resume ID`) and the prompt goes alone, without a history preamble.
    assert f"Continuing session {first_session[:8]}" in turn.text()
    assert 'You asked "second question"' in turn.text()
    stored = drv.app.store.turns(conversation.id)
    assert [t.prompt for t in stored] == ["first question", "second question"]
    assert [t.session_id for t in stored] == [first_session, first_session]


def test_turn_left_running_by_a_crash_shows_interrupted(
        start_app: StartApp, home: Path, qtbot: QtBot) -> None:
    store = Store()
    conversation = store.create_conversation("Crashed chat", "demo", str(home))
    sid = "ai-agent-stream-crashed0001"
    store.start_turn(conversation.id, sid, "demo", "do a long thing")
    store.append_event(TextDelta(sid, text="Partial answer before the crash"))
    store.append_event(ToolStart(sid, tool_id="t1", name="Bash", input={"command": "sleep 99"}))
    store.flush()
    # No Done and no close(): as if the process had been killed.
    store._conn.close()

    drv = start_app()
    pane = drv.pane
    assert pane.conversation_id == conversation.id
    qtbot.waitUntil(lambda: bool(pane.turn_views()) and not pane.transcript.busy)
    view = pane.turn_views()[0]
    assert view.status == "interrupted"
    assert "Interrupted" in view.footer.text()
    assert view.text() == "Partial answer before the crash"
    assert [c.status for c in view.tool_cards()] == ["interrupted"]


def test_shutdown_with_active_runs_leaves_nothing_alive(
        start_app: StartApp, monkeypatch: pytest.MonkeyPatch, qtbot: QtBot) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    one = drv.send("one")
    drv.wait_tool_running(one)
    drv.window.new_action.trigger()
    qtbot.waitUntil(lambda: drv.pane.running_stream is None)
    two = drv.send("two")
    drv.wait_tool_running(two)
    store = drv.app.store
    drv.close()  # the real shutdown coroutine
    assert processes_of(one) == [] and processes_of(two) == []
    assert drv.app.registry.live() == []
    reopened = Store()
    try:
        assert {reopened.turn_by_stream(s).status for s in (one, two)} == {"cancelled"}  # type: ignore[union-attr]
    finally:
        reopened.close()
    assert store is drv.app.store


def test_closing_the_window_with_runs_asks_first(
        start_app: StartApp, monkeypatch: pytest.MonkeyPatch, qtbot: QtBot) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60")
    drv = start_app()
    stream_id = drv.send("busy")
    drv.wait_tool_running(stream_id)
    closed: list[bool] = []
    drv.window.closed.connect(lambda: closed.append(True))

    drv.window.close()
    box = drv.window.findChild(QMessageBox, "quitDialog")
    assert box is not None and box.isVisible()
    assert drv.window.isVisible() and not closed
    box.button(QMessageBox.StandardButton.Cancel).click()
    qtbot.waitUntil(lambda: drv.window.findChild(QMessageBox, "quitDialog") is None)
    assert drv.window.isVisible() and drv.pane.running_stream == stream_id

    drv.window.close()
    box = drv.window.findChild(QMessageBox, "quitDialog")
    assert box is not None
    quit_button = box.findChild(QPushButton, "quitConfirmButton")
    assert quit_button is not None
    quit_button.click()
    qtbot.waitUntil(lambda: bool(closed))
    assert not drv.window.isVisible()
    drv.close()
    assert processes_of(stream_id) == []


@pytest.mark.parametrize("running", [False, True])
def test_delete_conversation_stops_its_run_first(
        start_app: StartApp, monkeypatch: pytest.MonkeyPatch, qtbot: QtBot, running: bool) -> None:
    monkeypatch.setenv("TOLARIA_DEMO_TOOL_SECONDS", "60" if running else "0")
    drv = start_app()
    doomed = drv.pane.conversation_id
    stream_id = drv.send("delete me")
    if running:
        drv.wait_tool_running(stream_id)
    else:
        drv.wait_finished()
    old_pane = drv.pane
    drv.window.delete_requested.emit(doomed)
    # (SQLite may give the id of a deleted row to the next new conversation: check the turn.)
    qtbot.waitUntil(lambda: drv.app.store.turn_by_stream(stream_id) is None, timeout=10_000)
    assert processes_of(stream_id) == []
    # The window never shows nothing: a fresh, empty chat takes the place of the last one.
    qtbot.waitUntil(lambda: drv.window.current_pane() not in (None, old_pane))
    assert drv.window.sidebar.list.count() == 1
    assert drv.pane.turn_views() == []
